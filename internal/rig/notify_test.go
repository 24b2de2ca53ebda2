package rig

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/live"
	"github.com/headroom-bench/headroom/internal/notify"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/transport"
	"github.com/headroom-bench/headroom/internal/verdict"
)

var fastNotify = notify.Options{Tries: 2, Backoff: time.Millisecond, Timeout: 30 * time.Second} // the timeout: a hang guard

func TestNotifierPostsTheComment(t *testing.T) {
	const token = "ghp_0123456789abcdef"
	var mu sync.Mutex
	var bodies []string
	var paths []string
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet {
			// the PR has no comment from an earlier run yet
			paths = append(paths, r.Method+" "+r.URL.Path)
			io.WriteString(w, `[]`)
			return
		}
		var in struct{ Body string }
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &in)
		bodies = append(bodies, in.Body)
		paths = append(paths, r.Method+" "+r.URL.Path)
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		io.WriteString(w, `{"id": 77}`)
	}))
	defer gh.Close()
	cfg := config.Run{Recipe: config.Recipe{Name: "recipe-1"}, Notify: config.Notify{
		GitHub: &config.GitHub{Repo: "acme/serving", PR: 5, TokenEnv: "HR_TEST_TOKEN", API: gh.URL}}}
	env := func(k string) (string, bool) {
		return map[string]string{"HR_TEST_TOKEN": token}[k], k == "HR_TEST_TOKEN"
	}
	n := startNotifierWith(cfg, env, fastNotify)
	red := new(transport.Redactor)
	n.redacting(red)
	// The token is registered with the run's redactor: nothing the run
	// writes can carry it.
	if got := red.String("auth " + token); strings.Contains(got, token) {
		t.Errorf("the redactor does not know the token: %q", got)
	}
	n.post(live.Message{Text: "recipe-1: pre-flight ok: leaked " + token, Event: "phase", Fields: map[string]any{"status": "ok"}})
	n.post(live.Message{Text: "recipe-1: step 1, 4 sessions: pass", Event: "step"})
	if w := n.finish(); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(paths, ",") != "GET /repos/acme/serving/issues/5/comments,POST /repos/acme/serving/issues/5/comments,PATCH /repos/acme/serving/issues/comments/77" {
		t.Errorf("requests %q", paths)
	}
	last := bodies[len(bodies)-1]
	if !strings.Contains(last, "headroom: recipe-1") || !strings.Contains(last, "step 1, 4 sessions: pass") || strings.Contains(last, token) {
		t.Errorf("comment %q: want the title and both lines, never the token", last)
	}
}

func TestNotifierFailuresAreWarnings(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer down.Close()
	cfg := config.Run{Recipe: config.Recipe{Name: "r"}, Notify: config.Notify{
		Webhook: down.URL + "/services/T/B/hook-secret",
		GitHub:  &config.GitHub{Repo: "acme/serving", PR: 5, TokenEnv: "HR_UNSET_TOKEN"}}}
	n := startNotifierWith(cfg, func(string) (string, bool) { return "", false }, fastNotify)
	n.redacting(new(transport.Redactor))
	// A webhook is not registered as a secret: a bare host would redact
	// every URL on it (config.yaml read "webhook: [redacted]/[redacted]").
	bare := startNotifierWith(config.Run{Notify: config.Notify{Webhook: down.URL}}, nil, fastNotify)
	red := new(transport.Redactor)
	bare.redacting(red)
	bare.finish()
	if got := red.String(down.URL + "/metrics"); got != down.URL+"/metrics" {
		t.Errorf("the redactor turns %s/metrics into %q", down.URL, got)
	}
	n.post(live.Message{Text: "r: step 1", Event: "step"})
	w := n.finish()
	text := strings.Join(w, "\n")
	// The missing token and the failed webhook are both said, neither
	// silently dropped, and the webhook's secret path is not shown.
	if len(w) != 2 || !strings.Contains(text, "$HR_UNSET_TOKEN is not set") || !strings.Contains(text, "1 of 1 posts failed") || strings.Contains(text, "hook-secret") {
		t.Errorf("warnings %q", w)
	}
	if again := n.finish(); len(again) != 0 {
		t.Errorf("a second finish returned %q", again)
	}
	n.close() // after finish: nothing left, no panic
	var none *notifier
	none.post(live.Message{Text: "x"})
	if none.finish() != nil {
		t.Error("a nil notifier has warnings")
	}
	if startNotifier(config.Run{}, nil) != nil {
		t.Error("a run with nowhere to post has a notifier")
	}
}

func TestStepMessageUsesTheReportsUnits(t *testing.T) {
	st := sweep.StepResult{Index: 2, Sessions: 8, Judged: verdict.Step{Verdict: verdict.Pass, Parts: []verdict.Part{
		{Name: verdict.PartTTFT, Verdict: verdict.Pass, Value: stats.Summary{Center: 1.5234, Lo: 1.4012, Hi: math.Inf(1)}},
		{Name: verdict.PartInteractivity, Verdict: verdict.Pass, Value: stats.Summary{Center: 24.06, Lo: 22.01, Hi: 26.33}},
		{Name: verdict.PartErrors, Verdict: verdict.Pass, Value: stats.Summary{Center: 0, Lo: 0, Hi: 0.0243}},
		{Name: "tool_calls", Verdict: verdict.Pass, Value: stats.Summary{Center: 0.004, Lo: 0, Hi: 0.0071}},
	}}}
	got := stepMessage("recipe-1", st).Text
	want := "recipe-1: step 3, 8 sessions: pass; ttft pass 1.52 (1.40-inf) s; interactivity pass 24.1 (22.0-26.3) tok/s/user; errors pass 0.0 (0.0-2.4)%; tool_calls pass 0.4 (0.0-0.7)%"
	if got != want {
		t.Errorf("step message\n  %s\nwant\n  %s", got, want)
	}
}

func TestLinkUploadedReport(t *testing.T) {
	const token = "ghp_0123456789abcdef"
	var mu sync.Mutex
	var bodies []string
	marker := (&notify.GitHub{Key: "recipe-1"}).Marker()
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.Method {
		case http.MethodGet:
			json.NewEncoder(w).Encode([]map[string]any{
				{"id": 1, "body": "LGTM"},
				{"id": 77, "body": marker + "\n### headroom: recipe-1\n\n- **recipe-1: capacity 8**\n<!-- headroom:where -->\n- 📁 run directory `/runs/recipe-1/x`\n<!-- /headroom:where -->\n"}})
		case http.MethodPatch:
			var in struct{ Body string }
			json.NewDecoder(r.Body).Decode(&in)
			bodies = append(bodies, r.URL.Path+" "+in.Body)
			io.WriteString(w, `{"id": 77}`)
		default:
			http.Error(w, "no", http.StatusMethodNotAllowed)
		}
	}))
	defer gh.Close()
	cfg := config.Run{Recipe: config.Recipe{Name: "recipe-1"}, Notify: config.Notify{
		GitHub: &config.GitHub{Repo: "acme/serving", PR: 5, TokenEnv: "HR_TEST_TOKEN", API: gh.URL}}}
	env := func(k string) (string, bool) { return token, k == "HR_TEST_TOKEN" }
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// a failed upload leaves the comment alone
	write("upload.json", `{"url": "s3://b/headroom/recipe-1/x/", "error": "AccessDenied"}`)
	if w := LinkUploadedReport(context.Background(), cfg, dir, env); w != "" || len(bodies) != 0 {
		t.Errorf("after a failed upload: warning %q, edits %q", w, bodies)
	}
	write("upload.json", `{"url": "s3://b/headroom/recipe-1/x/", "files": 9}`)
	write("report.html", "<html></html>")
	if w := LinkUploadedReport(context.Background(), cfg, dir, env); w != "" {
		t.Errorf("warning %q", w)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || !strings.HasPrefix(bodies[0], "/repos/acme/serving/issues/comments/77 ") ||
		!strings.Contains(bodies[0], "s3://b/headroom/recipe-1/x/report.html") || strings.Contains(bodies[0], "/runs/recipe-1/x") {
		t.Errorf("edits %q: want comment 77 pointed at the uploaded report.html", bodies)
	}
}
