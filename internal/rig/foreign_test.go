package rig

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// foreignGateway stands in front of the simulator the way a secured
// gateway in front of a reasoning model does: every path wants the key (or,
// for /metrics, basic auth), and every stream chunk is re-written as Python's
// json.dumps writes it (a space after ':' and ','), with the first half of
// each answer's tokens as delta.reasoning.
type foreignGateway struct {
	upstream           string
	key, team          string
	metricsUser, mpass string

	mu       sync.Mutex
	seen     map[string]int // path -> authorised requests
	refused  []string       // requests without the right credentials
	webhooks []string       // bodies posted to the webhook
}

func (g *foreignGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/hook" {
		b, _ := io.ReadAll(r.Body)
		g.mu.Lock()
		g.webhooks = append(g.webhooks, string(b))
		g.mu.Unlock()
		return
	}
	ok := r.Header.Get("Authorization") == "Bearer "+g.key && r.Header.Get("X-Team") == "team-"+g.team
	if r.URL.Path == "/metrics" {
		u, p, basic := r.BasicAuth()
		ok = basic && u == g.metricsUser && p == g.mpass
	}
	g.mu.Lock()
	if !ok {
		g.refused = append(g.refused, r.Method+" "+r.URL.Path)
	} else {
		g.seen[r.URL.Path]++
	}
	g.mu.Unlock()
	if !ok {
		http.Error(w, `{"error":{"message":"invalid api key","type":"authentication_error"}}`, http.StatusUnauthorized)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, g.upstream+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		io.Copy(w, resp.Body)
		return
	}
	flusher, _ := w.(http.Flusher)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 8<<20)
	tokens := 0
	for sc.Scan() {
		line := sc.Text()
		if p, isData := strings.CutPrefix(line, "data: "); isData && p != "[DONE]" {
			line = "data: " + respace(reasoningFirst(p, &tokens))
		}
		if _, err := io.WriteString(w, line+"\r\n"); err != nil { // CRLF, as some gateways write
			return // the caller went away: closing the upstream body aborts its request
		}
		if line == "" && flusher != nil {
			flusher.Flush()
		}
	}
}

// reasoningFirst renames delta.content to delta.reasoning for the first
// few tokens of an answer, as a reasoning model streams its thinking first.
func reasoningFirst(p string, tokens *int) string {
	var chunk map[string]any
	if json.Unmarshal([]byte(p), &chunk) != nil {
		return p
	}
	choices, _ := chunk["choices"].([]any)
	for _, c := range choices {
		delta, _ := c.(map[string]any)["delta"].(map[string]any)
		if s, ok := delta["content"].(string); ok && s != "" {
			*tokens++
			if *tokens <= 3 {
				delete(delta, "content")
				delta["reasoning"] = s
			}
		}
	}
	b, _ := json.Marshal(chunk)
	return string(b)
}

// respace writes compact JSON with a space after every ':' and ',' outside
// strings, as Python's json.dumps does by default.
func respace(s string) string {
	var b strings.Builder
	in, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		switch {
		case esc:
			esc = false
		case c == '\\' && in:
			esc = true
		case c == '"':
			in = !in
		case !in && (c == ':' || c == ','):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// TestSecuredReasoningGateway runs a short sweep against a gateway that
// wants a key, a header and basic auth for its metrics, and streams spaced
// JSON with delta.reasoning. Every request must carry the credentials, the
// step must be judged on real tokens, and no secret may appear in the run
// directory, the progress output, the summary or the webhook posts.
func TestSecuredReasoningGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short wall-clock sweep")
	}
	s, err := sim.New(sim.Options{Profile: sim.DefaultProfile(), Scale: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const key, team, mpass, hookToken = "sk-live-7f3a9c2e51", "blue4242", "metrics-pw-0x5e", "hooktok-91ab"
	gw := &foreignGateway{upstream: upstream, key: key, team: team, metricsUser: "scraper", mpass: mpass, seen: map[string]int{}}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	t.Setenv("HEADROOM_TEST_KEY", key)
	t.Setenv("HEADROOM_TEST_TEAM", team)

	u, _ := url.Parse(srv.URL)
	cfg := config.Default()
	cfg.Recipe.Endpoint = srv.URL
	cfg.Recipe.APIKeyEnv = "HEADROOM_TEST_KEY"
	cfg.Recipe.Headers = map[string]string{"X-Team": "team-${HEADROOM_TEST_TEAM}"}
	cfg.Recipe.Metrics = []string{"http://scraper:" + mpass + "@" + u.Host + "/metrics"}
	cfg.Recipe.Sim = config.SimSpec{}
	cfg.TimeScale = 1
	cfg.Notify.Webhook = srv.URL + "/hook?token=" + hookToken
	cfg.Workload.SynthSessions = 8
	cfg.Workload.ThinkTime = "none"
	cfg.Workload.Mix = config.Mix{Light: 1} // short prompts: priming fits a short warm-up on a busy machine
	cfg.Evals.Suites = nil
	cfg.Evals.UnderLoadShare = 0.05 // evals under load go through the gateway too
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{2}, 0, 0
	cfg.Sweep.WarmupS, cfg.Sweep.StepS, cfg.Sweep.WindowS, cfg.Sweep.ScrapeS, cfg.Sweep.DrainS = 8, 9, 3, 1, 10
	// The step is fixed: 2 sessions for 9 s cannot prove errors under 2%, and
	// this test is about credentials and stream shapes, not the verdict (with
	// the default's max_step_s it extended for 2 min 20 s to 30 turns).
	cfg.Sweep.MaxStepS = cfg.Sweep.StepS
	cfg.Workload.PrimeTimeoutS = 8
	cfg.Output = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	sum, err := Run(context.Background(), Options{Config: cfg, Progress: &progress})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	if testing.Verbose() {
		t.Log(progress.String())
	}

	gw.mu.Lock()
	refused, seen, hooks := gw.refused, gw.seen, strings.Join(gw.webhooks, "\n")
	gw.mu.Unlock()
	if len(refused) > 0 {
		t.Errorf("requests without the credentials: %v", refused)
	}
	for _, path := range []string{"/v1/models", "/v1/chat/completions", "/tokenize", "/metrics"} {
		if seen[path] == 0 {
			t.Errorf("no authorised request reached %s (seen %v)", path, seen)
		}
	}
	if !sum.PostFlight.Idle {
		t.Errorf("post-flight: %s (aborts must reach the engine through the gateway)", sum.PostFlight.Detail)
	}
	if len(sum.Steps) != 1 {
		t.Fatalf("%d steps, want 1", len(sum.Steps))
	}
	st := sum.Steps[0]
	if v := st.Verdict; v != verdict.Pass && v != verdict.TooClose {
		t.Errorf("2 sessions on the default profile read %s: %+v", v, st)
	}
	t.Logf("2 sessions: %s; P90 TTFT %v, P90 interactivity %v, errors %v", st.Verdict, st.TTFTP90, st.InteractivityP90, st.ErrorRate)
	recs, err := load.ReadRecords(filepath.Join(sum.RunDir, "records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	measured, failed, reasoning := 0, 0, 0
	for _, r := range recs {
		if r.Phase != load.PhaseMeasure {
			continue
		}
		measured++
		if r.Failed() && r.Error != load.ErrAborted {
			failed++
			t.Logf("failed: %s %s", r.Error, r.Detail)
		}
		if r.ReasoningChunks > 0 {
			reasoning++
		}
	}
	if measured == 0 || failed > 0 {
		t.Errorf("%d of %d judged requests failed against spaced JSON with delta.reasoning", failed, measured)
	}
	if reasoning == 0 {
		t.Errorf("no record kept its reasoning tokens apart (%d judged requests)", measured)
	}
	if hooks == "" {
		t.Error("the webhook got no post")
	}

	// No secret anywhere: run directory, progress, summary, webhook posts.
	secrets := []string{key, team, mpass, hookToken}
	var everything []string
	filepath.WalkDir(sum.RunDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			everything = append(everything, p+"\n"+string(b))
		}
		return nil
	})
	sj, _ := json.Marshal(sum)
	everything = append(everything, "progress\n"+progress.String(), "summary\n"+string(sj), "webhook\n"+hooks)
	for _, text := range everything {
		name, _, _ := strings.Cut(text, "\n")
		for _, sec := range secrets {
			if strings.Contains(text, sec) {
				t.Errorf("%s holds the secret %q", name, sec)
			}
		}
	}
	if len(everything) < 6 {
		t.Errorf("only %d files were checked", len(everything))
	}
}
