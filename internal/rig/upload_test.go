package rig

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/upload"
)

// TestStampVersion: a new run directory says which build wrote it; a
// resume keeps that and adds its own.
func TestStampVersion(t *testing.T) {
	d, err := report.NewDir(t.TempDir(), "recipe-0", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	read := func() versionFile {
		t.Helper()
		b, err := os.ReadFile(d.File("version.json"))
		if err != nil {
			t.Fatal(err)
		}
		var v versionFile
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := stampVersion(d, "v0.1.0 (commit 0123456789ab, go1.26.8)"); err != nil {
		t.Fatal(err)
	}
	if v := read(); v.Headroom != "v0.1.0 (commit 0123456789ab, go1.26.8)" || v.Go == "" || v.Records == 0 || len(v.Resumed) != 0 {
		t.Errorf("version.json %+v", v)
	}
	if err := stampVersion(d, "v0.1.1"); err != nil {
		t.Fatal(err)
	}
	if v := read(); v.Headroom != "v0.1.0 (commit 0123456789ab, go1.26.8)" || len(v.Resumed) != 1 || v.Resumed[0] != "v0.1.1" {
		t.Errorf("after a resume, version.json %+v", v)
	}
}

// putRecorder stores PUT bodies by path; with refuse set it answers 403.
type putRecorder struct {
	mu      sync.Mutex
	objects map[string]string
	refuse  bool
}

func (p *putRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if p.refuse || r.Method != http.MethodPut {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<Error><Code>AccessDenied</Code><Message>no</Message></Error>")
		return
	}
	p.mu.Lock()
	p.objects[r.URL.Path] = string(b)
	p.mu.Unlock()
}

func TestUploadRun(t *testing.T) {
	rec := &putRecorder{objects: map[string]string{}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	d, err := report.NewDir(t.TempDir(), "recipe-0", time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"config.yaml": "version: 1\n", "summary.json": "{}\n", "report.md": "# r\n"} {
		if err := d.WriteFile(name, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "a-long-secret-key-value"}
	target := upload.Config{S3: &upload.S3{Endpoint: srv.URL, Bucket: "bench", Prefix: "hr"}}

	// Nothing configured: nothing happens.
	sum := report.Summary{RunDir: d.Path()}
	UploadRun(context.Background(), upload.Config{}, &sum, func(k string) string { return env[k] }, nil)
	if _, err := os.Stat(d.File("upload.json")); err == nil || len(rec.objects) != 0 {
		t.Fatal("an upload happened with no report.upload")
	}

	// Even on a cancelled context (an interrupted run), the files go up.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var log strings.Builder
	UploadRun(ctx, target, &sum, func(k string) string { return env[k] }, &log)
	if len(sum.Warnings) != 0 {
		t.Fatalf("warnings %v", sum.Warnings)
	}
	if got := rec.objects["/bench/hr/recipe-0/20261129T093000Z/summary.json"]; got != "{}\n" || len(rec.objects) != 3 {
		t.Errorf("objects %v", rec.objects)
	}
	if !strings.Contains(log.String(), "uploaded 3 files") {
		t.Errorf("progress %q", log.String())
	}
	var u uploadRecord
	b, _ := os.ReadFile(d.File("upload.json"))
	if err := json.Unmarshal(b, &u); err != nil || u.Files != 3 || u.URL != "s3://bench/hr/recipe-0/20261129T093000Z/" || u.Credentials != "$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY" || u.Error != "" {
		t.Errorf("upload.json %s (%v)", b, err)
	}

	// A refused upload is a warning in the summary and in upload.json,
	// never the secret.
	rec.refuse = true
	UploadRun(context.Background(), target, &sum, func(k string) string { return env[k] }, nil)
	if len(sum.Warnings) != 1 || !strings.Contains(sum.Warnings[0], "AccessDenied") {
		t.Fatalf("warnings %v", sum.Warnings)
	}
	b, _ = os.ReadFile(d.File("upload.json"))
	if !strings.Contains(string(b), "AccessDenied") || strings.Contains(string(b), env["AWS_SECRET_ACCESS_KEY"]) {
		t.Errorf("upload.json after a refusal: %s", b)
	}

	// No key pair in the variables the run file names: a warning naming
	// them (with the names given, the SDK's default chain, which would look
	// on this host for a profile or an instance role, is not asked).
	sum.Warnings = nil
	named := upload.Config{S3: &upload.S3{Endpoint: srv.URL, Bucket: "bench", AccessKeyEnv: "HR_AK", SecretKeyEnv: "HR_SK"}}
	UploadRun(context.Background(), named, &sum, func(string) string { return "" }, nil)
	if len(sum.Warnings) != 1 || !strings.Contains(sum.Warnings[0], "$HR_AK and $HR_SK empty") {
		t.Errorf("warnings %v", sum.Warnings)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), ".upload.json")); err == nil {
		t.Error("a temporary file was left")
	}
}
