package rig

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/live"
	"github.com/headroom-bench/headroom/internal/notify"
	"github.com/headroom-bench/headroom/internal/transport"
)

var fastNotify = notify.Options{Tries: 2, Backoff: time.Millisecond, Timeout: 2 * time.Second}

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
	if strings.Join(paths, ",") != "POST /repos/acme/serving/issues/5/comments,PATCH /repos/acme/serving/issues/comments/77" {
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
