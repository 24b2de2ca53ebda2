package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// lockedBuffer is a bytes.Buffer safe to write from the serving goroutine
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunsOutliveTheProcess: a real headroom process runs a short
// simulated sweep and exits; its run directory is then listed, served by
// `runs serve` and pulled back whole by `runs pull`, as from a finished
// pod's volume.
func TestRunsOutliveTheProcess(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "runs")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HEADROOM_TEST_MAIN=1", "HEADROOM_TEST_ARGS=run --set sweep.ladder=[2] --set sweep.target=2 --set sweep.stress=0 --set sweep.repeat=false --set sweep.step_s=120 --set sweep.warmup_s=30 --set sweep.drain_s=30 --set evals.suites=[] --set workload.synth_sessions=8 --output "+root)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done: // its exit code is the verdict's; the directory is what counts
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the run did not finish in 120 s:\n%s", out.String())
	}

	var list bytes.Buffer
	if err := run(context.Background(), []string{"runs", "list", "--root", root, "--json"}, &list, &list); err != nil {
		t.Fatalf("runs list: %v\n%s\nrun output:\n%s", err, list.String(), out.String())
	}
	var runs []struct {
		Name     string `json:"name"`
		Finished bool   `json:"finished"`
	}
	if err := json.Unmarshal(list.Bytes(), &runs); err != nil || len(runs) != 1 || !runs[0].Finished {
		t.Fatalf("runs list: %s (%v)\nrun output:\n%s", list.String(), err, out.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var serveErr lockedBuffer
	served := make(chan error, 1)
	go func() {
		served <- run(ctx, []string{"runs", "serve", "--root", root, "--addr", "127.0.0.1:0"}, io.Discard, &serveErr)
	}()
	addr := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	deadline := time.Now().Add(10 * time.Second)
	for addr.FindString(serveErr.String()) == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	url := addr.FindString(serveErr.String())
	if url == "" {
		t.Fatalf("runs serve said %q", serveErr.String())
	}
	dest := filepath.Join(dir, "pulled")
	var pulled bytes.Buffer
	if err := run(context.Background(), []string{"runs", "pull", url, runs[0].Name, "--to", dest}, &pulled, &pulled); err != nil {
		t.Fatalf("runs pull: %v: %s", err, pulled.String())
	}
	src := filepath.Join(root, filepath.FromSlash(runs[0].Name))
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"config.yaml", "records.jsonl", "steps.jsonl", "summary.json", "report.html"} {
		if _, err := os.Stat(filepath.Join(src, want)); err != nil {
			t.Errorf("the run directory has no %s", want)
		}
	}
	for _, e := range entries {
		a, _ := os.ReadFile(filepath.Join(src, e.Name()))
		b, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(runs[0].Name), e.Name()))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: pulled copy differs or is missing (%v)", e.Name(), err)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("runs serve: %v", err)
	}

	// pack writes the same run as a tar.gz that any tar reads.
	var tgz bytes.Buffer
	if err := run(context.Background(), []string{"runs", "pack", "--root", root, src}, &tgz, io.Discard); err != nil || tgz.Len() == 0 {
		t.Fatalf("runs pack: %v", err)
	}
	if tarBin, err := exec.LookPath("tar"); err == nil {
		c := exec.Command(tarBin, "tzf", "-")
		c.Stdin = &tgz
		listing, err := c.Output()
		if err != nil || !strings.Contains(string(listing), runs[0].Name+"/summary.json") {
			t.Errorf("tar tzf of runs pack: %v\n%s", err, listing)
		}
	}
}

// TestRunsUpload: `runs upload` sends each file of a run directory with
// the keys from the environment, and fails clearly without them.
func TestRunsUpload(t *testing.T) {
	var mu sync.Mutex
	got := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !strings.Contains(r.Header.Get("Authorization"), "Credential=AKIDRUNS/") {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		mu.Lock()
		got[r.URL.Path] = true
		mu.Unlock()
	}))
	defer srv.Close()
	d := filepath.Join(t.TempDir(), "recipe-0", "20261129T093000Z")
	os.MkdirAll(d, 0o755)
	for _, f := range []string{"config.yaml", "summary.json"} {
		os.WriteFile(filepath.Join(d, f), []byte("x\n"), 0o644)
	}
	args := []string{"runs", "upload", d, "--endpoint", srv.URL, "--bucket", "bench", "--prefix", "hr", "--access-key-env", "HR_TEST_AK", "--secret-key-env", "HR_TEST_SK"}
	var out bytes.Buffer
	if err := run(context.Background(), args, &out, &out); err == nil || !strings.Contains(err.Error(), "$HR_TEST_AK") {
		t.Errorf("upload without keys: %v", err)
	}
	t.Setenv("HR_TEST_AK", "AKIDRUNS")
	t.Setenv("HR_TEST_SK", "secret-for-the-test")
	out.Reset()
	if err := run(context.Background(), args, &out, &out); err != nil {
		t.Fatalf("upload: %v: %s", err, out.String())
	}
	if !got["/bench/hr/recipe-0/20261129T093000Z/summary.json"] || !got["/bench/hr/recipe-0/20261129T093000Z/config.yaml"] {
		t.Errorf("objects %v", got)
	}
	if !strings.Contains(out.String(), "2 files") || !strings.Contains(out.String(), "s3://bench/hr/recipe-0/20261129T093000Z/") {
		t.Errorf("output %q", out.String())
	}
}

// TestRunsListTakesTheFolderAndShowsVerdicts: `runs list DIR` failed
// ("unknown command"), and the list showed no capacity or verdict.
func TestRunsListTakesTheFolderAndShowsVerdicts(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	mk := func(name string, s *report.Summary) {
		d := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "config.yaml"), []byte("recipe: {name: r}\n"), 0o644)
		if s != nil {
			b, _ := json.Marshal(s)
			os.WriteFile(filepath.Join(d, "summary.json"), b, 0o644)
		}
	}
	step := []report.Step{{Sessions: 8}}
	mk("recipe-1/20261201T090000Z", &report.Summary{Steps: step, Capacity: sweep.Capacity{Sessions: 9.2, Lo: 8.9, Hi: 10.1, LimitedBy: "interactivity"},
		Target: &sweep.TargetVerdict{Sessions: 8, Verdict: verdict.Pass}})
	mk("recipe-2/20261201T100000Z", &report.Summary{Steps: step, Capacity: sweep.Capacity{Sessions: 3.5, Lo: 2.1, Hi: 4.4, LimitedBy: "ttft"},
		Target: &sweep.TargetVerdict{Sessions: 8, Verdict: verdict.Fail}})
	mk("recipe-3/20261201T110000Z", &report.Summary{Steps: step, Capacity: sweep.Capacity{Sessions: 16, AtLeast: true}})
	mk("recipe-4/20261201T120000Z", nil) // still running, or killed

	var out bytes.Buffer
	if err := run(context.Background(), []string{"runs", "list", root}, &out, &out); err != nil {
		t.Fatalf("runs list DIR: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^RUN\s+FINISHED\s+CAPACITY\s+VERDICT\s+FILES`),
		regexp.MustCompile(`(?m)^recipe-1/20261201T090000Z\s+yes\s+9\.2 \(8\.9-10\.1\)\s+pass at 8 sessions\s`),
		regexp.MustCompile(`(?m)^recipe-2/20261201T100000Z\s+yes\s+3\.5 \(2\.1-4\.4\)\s+fail at 8 sessions\s`),
		regexp.MustCompile(`(?m)^recipe-3/20261201T110000Z\s+yes\s+>= 16\s+no target\s`),
		regexp.MustCompile(`(?m)^recipe-4/20261201T120000Z\s+no \(no summary\.json\)\s+-\s+-\s`),
	} {
		if !want.MatchString(text) {
			t.Errorf("runs list lacks a line matching %s:\n%s", want, text)
		}
	}

	out.Reset()
	if err := run(context.Background(), []string{"runs", "list", "--json", root}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var listed []struct {
		Name     string  `json:"name"`
		Capacity float64 `json:"capacity_sessions"`
		Verdict  string  `json:"verdict"`
		Target   int     `json:"target"`
	}
	if err := json.Unmarshal(out.Bytes(), &listed); err != nil || len(listed) != 4 {
		t.Fatalf("runs list --json: %v\n%s", err, out.String())
	}
	byName := map[string]int{}
	for i, l := range listed {
		byName[l.Name] = i
	}
	if l := listed[byName["recipe-2/20261201T100000Z"]]; l.Capacity != 3.5 || l.Verdict != "fail" || l.Target != 8 {
		t.Errorf("recipe-2 in JSON: %+v", l)
	}

	// the folder given twice, two ways, is refused
	if err := run(context.Background(), []string{"runs", "list", "--root", "elsewhere", root}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "give the folder once") {
		t.Errorf("DIR and a different --root: %v", err)
	}
}
