package upload

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPackUnpack(t *testing.T) {
	root := t.TempDir()
	runDir(t, root, "recipe-0-vllm", "20261129T093000Z")
	runDir(t, root, "recipe-1-sglang", "20261129T120000Z")
	os.MkdirAll(filepath.Join(root, "recipe-1-sglang", "not-a-run"), 0o755) // no config.yaml

	runs, err := ListRuns(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.Name)
		if !r.Finished || r.Files != 6 {
			t.Errorf("%s: finished %v, %d files; want finished, 6 files", r.Name, r.Finished, r.Files)
		}
	}
	slices.Sort(names)
	if want := []string{"recipe-0-vllm/20261129T093000Z", "recipe-1-sglang/20261129T120000Z"}; !slices.Equal(names, want) {
		t.Fatalf("runs %v, want %v", names, want)
	}

	// One run, then all of them.
	var one, all bytes.Buffer
	if err := Pack(&one, root, []string{"recipe-0-vllm/20261129T093000Z"}); err != nil {
		t.Fatal(err)
	}
	if err := Pack(&all, root, nil); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	got, err := Unpack(&one, dest)
	if err != nil || !slices.Equal(got, []string{"recipe-0-vllm/20261129T093000Z"}) {
		t.Fatalf("unpacked %v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dest, "recipe-1-sglang")); err == nil {
		t.Error("packing one run packed the other too")
	}
	dest = t.TempDir()
	got, err = Unpack(&all, dest)
	if err != nil || len(got) != 2 {
		t.Fatalf("unpacked %v, %v", got, err)
	}
	for _, n := range names {
		for _, f := range []string{"config.yaml", "records.jsonl", "summary.json", "charts/ttft.svg"} {
			a, _ := os.ReadFile(filepath.Join(root, n, f))
			b, err := os.ReadFile(filepath.Join(dest, n, f))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s/%s: unpacked %q (%v), packed %q", n, f, b, err, a)
			}
		}
		if _, err := os.Stat(filepath.Join(dest, n, ".summary.json.42")); err == nil {
			t.Errorf("%s: a temporary file was packed", n)
		}
	}

	// Names that are not runs are refused before anything is written.
	for _, bad := range []string{"../etc", "recipe-0-vllm", "recipe-1-sglang/not-a-run", "/abs/x", "a/../../b"} {
		if err := Pack(&bytes.Buffer{}, root, []string{bad}); err == nil {
			t.Errorf("Pack(%q) packed", bad)
		}
	}
}

// TestUnpackRefusesEscapes: entries that would land outside the folder,
// and links, are refused.
func TestUnpackRefusesEscapes(t *testing.T) {
	for _, h := range []tar.Header{
		{Name: "../outside.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644},
		{Name: "/etc/outside.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644},
		{Name: "r/run/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd", Mode: 0o777},
	} {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		tw.WriteHeader(&h)
		if h.Size > 0 {
			tw.Write([]byte("x"))
		}
		tw.Close()
		gz.Close()
		dest := t.TempDir()
		if _, err := Unpack(&buf, dest); err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("%s: %v", h.Name, err)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(dest), "outside.txt")); err == nil {
			t.Errorf("%s was written outside", h.Name)
		}
	}
	if _, err := Unpack(strings.NewReader("not gzip"), t.TempDir()); err == nil {
		t.Error("a stream that is not gzip unpacked")
	}
}

func TestServePull(t *testing.T) {
	root := t.TempDir()
	runDir(t, root, "recipe-0-vllm", "20261129T093000Z")
	runDir(t, root, "recipe-0-vllm", "20261129T100000Z")
	srv := httptest.NewServer(Handler(root))
	defer srv.Close()
	ctx := context.Background()

	runs, err := Runs(ctx, srv.Client(), srv.URL)
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs %v, %v", runs, err)
	}
	dest := t.TempDir()
	got, err := Pull(ctx, srv.Client(), srv.URL, dest, []string{"recipe-0-vllm/20261129T100000Z"})
	if err != nil || !slices.Equal(got, []string{"recipe-0-vllm/20261129T100000Z"}) {
		t.Fatalf("pulled %v, %v", got, err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "recipe-0-vllm/20261129T100000Z/summary.json")); err != nil || !strings.Contains(string(b), `"version"`) {
		t.Errorf("pulled summary.json: %q, %v", b, err)
	}
	if _, err := Pull(ctx, srv.Client(), srv.URL, dest, []string{"recipe-0-vllm/nope"}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("pulling a run that is not there: %v", err)
	}
	if _, err := Pull(ctx, srv.Client(), srv.URL, dest, []string{"../../etc"}); err == nil {
		t.Error("pulling ../../etc worked")
	}
	got, err = Pull(ctx, srv.Client(), srv.URL, t.TempDir(), nil)
	if err != nil || len(got) != 2 {
		t.Errorf("pull all: %v, %v", got, err)
	}
}
