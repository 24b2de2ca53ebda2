package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-bench/headroom/internal/canary"
	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/deploy"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/sim"
)

func startCanarySim(t *testing.T, seed uint64) string {
	t.Helper()
	s, err := sim.New(sim.Options{Profile: sim.DefaultProfile(), Scale: 1, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return base
}

// TestCanaryCommandWithoutTraffic runs `headroom canary` in front of two
// simulators that no agent uses: both sides are scraped, the candidate
// answers nothing, so the first share holds until max_hold_s and the canary
// ends undecided (exit status 2), with its report and both recordings
// written.
func TestCanaryCommandWithoutTraffic(t *testing.T) {
	base, cand := startCanarySim(t, 1), startCanarySim(t, 2)
	dir := t.TempDir()
	run := filepath.Join(dir, "canary.yaml")
	yaml := `version: 1
recipe:
  name: candidate-1
  nodes: 1
  gpus_per_node: 1
  endpoint: ` + cand + `
  model: ` + sim.DefaultProfile().Model + `
  metrics: [` + cand + `/metrics]
bar: {ttft_p90_s: 5, interactivity_p90_tps: 10, error_rate: 0.05}
sweep: {ladder: [1], step_s: 1, window_s: 0.3, scrape_s: 0.1}
canary:
  listen: 127.0.0.1:0
  baseline: {endpoint: ` + base + `, metrics: [` + base + `/metrics]}
  shares: [0.05, 0.2]
  hold_s: 0.9
  max_hold_s: 1
`
	if err := os.WriteFile(run, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	err := runWith(t, []string{"canary", "-f", run, "-o", out, "--exit-when-done"}, &stdout, &stderr)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("err %v, want exit status 2 (undecided)\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "canary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res canary.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != canary.Undecided || res.Final.Share != 0.05 || !strings.Contains(stdout.String(), "canary undecided") {
		t.Fatalf("outcome %s (%s), share %g; stdout %s", res.Outcome, res.Reason, res.Final.Share, stdout.String())
	}
	for _, f := range []string{"canary.md", "baseline.jsonl.gz", "candidate.jsonl.gz"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestCanaryCommandNeedsCanarySection: a run file without a canary section
// is refused with what to add.
func TestCanaryCommandNeedsCanarySection(t *testing.T) {
	cand := startCanarySim(t, 1)
	dir := t.TempDir()
	run := filepath.Join(dir, "run.yaml")
	yaml := `version: 1
recipe: {name: c, nodes: 1, gpus_per_node: 1, endpoint: ` + cand + `, model: m, metrics: [` + cand + `/metrics]}
bar: {ttft_p90_s: 5, interactivity_p90_tps: 10, error_rate: 0.05}
sweep: {ladder: [1], step_s: 180}
`
	if err := os.WriteFile(run, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runWith(t, []string{"canary", "-f", run}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no canary section") || !strings.Contains(err.Error(), "canary.baseline") {
		t.Fatalf("err %v, want the missing canary section named", err)
	}
}

func runWith(t *testing.T, args []string, stdout, stderr *bytes.Buffer) error {
	t.Helper()
	return run(context.Background(), args, stdout, stderr)
}

// TestAfterCanaryPromotesReady: a ready candidate is promoted through the
// promote path (deployed, ready, kept and labelled) only with promote:
// on_ready; a failed canary exits 1 and an undecided one 2, promoting
// nothing.
func TestAfterCanaryPromotesReady(t *testing.T) {
	cfg := config.Run{Recipe: config.Recipe{Name: "cand", Endpoint: "http://127.0.0.1:1"}, Canary: &config.Canary{Promote: config.CanaryPromoteOnReady}}
	cases := []struct {
		outcome, promote string
		code             int
		calls            string
	}{
		{canary.Ready, config.CanaryPromoteOnReady, 0, "deploy ready promote cand/canary-x"},
		{canary.Ready, config.CanaryPromoteNever, 0, ""},
		{canary.Failed, config.CanaryPromoteOnReady, 1, ""},
		{canary.Undecided, config.CanaryPromoteOnReady, 2, ""},
	}
	for _, tc := range cases {
		p := &promoter{}
		cfg.Canary.Promote = tc.promote
		err := afterCanary(context.Background(), cfg, canary.Result{Outcome: tc.outcome}, "canary-x", &bytes.Buffer{}, &bytes.Buffer{},
			func(recipe.Recipe, deploy.Env) (deploy.Deployer, error) { return p, nil })
		code := 0
		var ee exitError
		if errors.As(err, &ee) {
			code = ee.code
		} else if err != nil {
			t.Fatalf("%s, %s: %v", tc.outcome, tc.promote, err)
		}
		if code != tc.code || strings.Join(p.calls, " ") != tc.calls {
			t.Errorf("%s, %s: exit %d, calls %q; want %d, %q", tc.outcome, tc.promote, code, p.calls, tc.code, tc.calls)
		}
	}
}

// TestCanaryCommandRefusesRouteWithoutSessionPersistence runs `headroom
// canary` with canary.split.type httproute against a loopback stand-in for
// an API server whose route's rule has no session persistence: the canary
// reads the route through the kubeconfig the run file names (relative to
// its folder), refuses to begin, saying why, writes no weight and opens no
// proxy.
func TestCanaryCommandRefusesRouteWithoutSessionPersistence(t *testing.T) {
	base, cand := startCanarySim(t, 1), startCanarySim(t, 2)
	var mu sync.Mutex
	var seen []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if r.Method != http.MethodGet || r.URL.Path != "/apis/gateway.networking.k8s.io/v1/namespaces/llm/httproutes/chat" {
			http.Error(w, "not here", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{"name":"chat","namespace":"llm","resourceVersion":"7"},
"spec":{"rules":[{"backendRefs":[{"name":"vllm-today","port":8000},{"name":"vllm-cand","port":8000,"weight":0}]}]}}`)
	}))
	t.Cleanup(api.Close)
	dir := t.TempDir()
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "` + api.URL + `"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: fake, context: {cluster: fake, user: u}}]
current-context: fake
`
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "canary.yaml")
	yaml := `version: 1
recipe: {name: candidate-1, nodes: 1, gpus_per_node: 1, endpoint: ` + cand + `, model: m, metrics: [` + cand + `/metrics]}
bar: {ttft_p90_s: 5, interactivity_p90_tps: 10, error_rate: 0.05}
sweep: {ladder: [1], step_s: 1, window_s: 0.3, scrape_s: 0.1}
canary:
  baseline: {endpoint: ` + base + `, metrics: [` + base + `/metrics]}
  shares: [0.05, 0.2]
  hold_s: 0.9
  session_header: X-Session-Id
  split:
    type: httproute
    httproute: {namespace: llm, name: chat, baseline: vllm-today, candidate: vllm-cand, kubeconfig: kubeconfig}
`
	if err := os.WriteFile(run, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	err := runWith(t, []string{"canary", "-f", run, "-o", out, "--exit-when-done"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "HTTPRoute llm/chat rule 0 has no sessionPersistence") || !strings.Contains(err.Error(), "lose its cache") || !strings.Contains(err.Error(), "sessionName: X-Session-Id") {
		t.Fatalf("err %v, want the rule refused for want of session persistence\nstderr: %s", err, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ", ") != "GET /apis/gateway.networking.k8s.io/v1/namespaces/llm/httproutes/chat" {
		t.Errorf("the API server was sent %v: want one read and no write", seen)
	}
	for _, f := range []string{"baseline.jsonl.gz", "candidate.jsonl.gz"} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			t.Errorf("%s written: a gateway's split records nothing", f)
		}
	}
}

// TestCanaryJudgesWithTheRunFilesOptions: the canary judges its windows as
// a recipe run judges its steps, so bar.allow_preemptions and
// sweep.kv_limit reach it (it had judged with the defaults alone, so a run
// file that allowed preemptions still had its canary held too close).
func TestCanaryJudgesWithTheRunFilesOptions(t *testing.T) {
	cfg := config.Default()
	cfg.Canary = &config.Canary{Shares: []float64{0.05, 0.2}, HoldS: 120}
	cfg.Bar.AllowPreemptions, cfg.Bar.ClientErrors = true, true
	cfg.Sweep.KVLimit, cfg.Sweep.Seed, cfg.Sweep.Resamples = 0.9, 7, 500
	o := canaryPlan(cfg).Options
	if !o.AllowPreemptions || !o.ClientErrors || o.KVLimit != 0.9 || o.Seed != 7 || o.Resamples != 500 {
		t.Errorf("canary options %+v: want allow_preemptions, client_errors, kv_limit 0.9, seed 7 and 500 resamples from the run file", o)
	}
}
