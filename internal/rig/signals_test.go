package rig

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// standIn serves, on loopback, /v1/models and the /metrics of an
// independent vLLM stand-in (finish_reason, not vLLM's finished_reason; no
// HTTP status counters), as the signal package's fixture writes it.
func standIn(t *testing.T, model string) string {
	t.Helper()
	url, _ := lazyStandIn(t, model, false, 0)
	return url
}

// lazyStandIn is standIn; when lazy, its /metrics leaves out the latency
// histograms and the request counters until it has answered a chat
// completion, and for lag scrapes after it, as a freshly started
// llm-d-inference-sim does (it counts a request a moment after its answer
// ends). answered counts the chat completions.
func lazyStandIn(t *testing.T, model string, lazy bool, lag int64) (string, *atomic.Int64) {
	t.Helper()
	exposition, err := os.ReadFile("../signal/testdata/vllm_finish_reason_metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	var early []byte // the exposition without its latency histograms
	for _, line := range strings.SplitAfter(string(exposition), "\n") {
		if !strings.Contains(line, "_token_") && !strings.Contains(line, "request_success") {
			early = append(early, line...)
		}
	}
	var answered, after atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","owned_by":"vllm"}]}`, model)
		case "/v1/chat/completions":
			answered.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"pong\"}}]}\n\ndata: [DONE]\n\n")
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			if lazy && (answered.Load() == 0 || after.Add(1) <= lag) {
				w.Write(early)
				return
			}
			w.Write(exposition)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &answered
}

// preflightAgainst runs pre-flight against a stand-in with the default bar
// (P90 TTFT 5.3 s, 10 tokens/s) and errors counted as the client sees them.
func preflightAgainst(t *testing.T, m signal.Mapping) (string, *signal.Scraper, error) {
	t.Helper()
	cfg := config.Default()
	url := standIn(t, cfg.Recipe.Model)
	cfg.Recipe.Endpoint, cfg.Recipe.Metrics = url, []string{url + "/metrics"}
	cfg.Bar.ClientErrors = true
	clock, err := timescale.New(1)
	if err != nil {
		t.Fatal(err)
	}
	var acc access
	scraper := &signal.Scraper{Targets: cfg.Recipe.Metrics, Mapping: m, Client: acc.metrics.Client(probeTimeout)}
	detail, err := preflight(context.Background(), &cfg, url, acc, fixedSource(scraper, acc), clock)
	return detail, scraper, err
}

// TestPreflightReadsAStandIn: the vllm mapping reads a stand-in's
// finish_reason counters, pre-flight passes, and its detail notes the abort
// counter no series reads yet and the bar inside TTFT's (5, 7.5] bucket.
func TestPreflightReadsAStandIn(t *testing.T) {
	detail, scraper, err := preflightAgainst(t, signal.VLLM())
	if err != nil {
		t.Fatalf("pre-flight against a finish_reason stand-in: %v", err)
	}
	for _, want := range []string{
		`requests_aborted, requests_failed: no matching series yet`,
		"the TTFT bar 5.3 s sits inside the bucket (5, 7.5] of vllm:time_to_first_token_seconds",
	} {
		if !strings.Contains(detail, want) {
			t.Errorf("pre-flight detail %q does not note %q", detail, want)
		}
	}
	if strings.Contains(detail, "interactivity bar") {
		t.Errorf("10 tokens/s is 0.1 s per token, an edge of vLLM's buckets, yet pre-flight notes it: %q", detail)
	}
	s, err := scraper.Scrape(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ok, aborted := s.Counter[signal.RequestsOK], s.Counter[signal.RequestsAborted]; ok != 50 || aborted != 0 {
		t.Errorf("finished %g, aborted %g; want the stand-in's 50 (stop, length, tool_calls) and 0", ok, aborted)
	}
}

// TestPreflightStopsAWrongLabel: a mapping that matches finished_reason on
// a server labelling finish_reason fails pre-flight, naming the labels the
// family has and the one the rule matches.
func TestPreflightStopsAWrongLabel(t *testing.T) {
	var m signal.Mapping
	for _, r := range signal.VLLM() {
		if _, stand := r.Match["finish_reason"]; !stand {
			m = append(m, r)
		}
	}
	_, _, err := preflightAgainst(t, m)
	if err == nil {
		t.Fatal("pre-flight passed with a rule that reads 0 all run")
	}
	for _, want := range []string{
		"vllm:request_success_total has labels finish_reason (length, remote_decode, stop, tool_calls), model_name",
		"the rule for requests_aborted matches finished_reason",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestFetchFamilies: the bodies are parsed per target, the engine is told
// by its prefixes, and a target that fails is named without its user info.
func TestFetchFamilies(t *testing.T) {
	url := standIn(t, "m")
	var acc access
	fetchFamilies := func(ctx context.Context, hc *http.Client, targets []string) ([]map[string]*dto.MetricFamily, error) {
		return (&signal.Scraper{Targets: targets, Client: hc}).Families(ctx)
	}
	fams, err := fetchFamilies(context.Background(), acc.metrics.Client(probeTimeout), []string{url + "/metrics"})
	if err != nil || len(fams) != 1 || fams[0]["vllm:request_success_total"] == nil {
		t.Fatalf("families %d, %v", len(fams), err)
	}
	if eng := engineOfFamilies(fams); eng != "vllm" {
		t.Errorf("engine %q, want vllm", eng)
	}
	bad := strings.Replace(url, "http://", "http://user:secret@", 1) + "/missing"
	_, err = fetchFamilies(context.Background(), acc.metrics.Client(probeTimeout), []string{bad})
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "404") {
		t.Errorf("error %v: want a 404 that keeps the password out", err)
	}
}

// TestPreflightFallsBackToClientErrors: a server that reports no HTTP
// status counters, with bar.client_errors left off, passes pre-flight:
// errors are counted as the client sees them, and pre-flight says so once.
// Before, it stopped: "the bar needs signals the server does not report:
// http_4xx, http_5xx".
func TestPreflightFallsBackToClientErrors(t *testing.T) {
	cfg := config.Default()
	url := standIn(t, cfg.Recipe.Model)
	cfg.Recipe.Endpoint, cfg.Recipe.Metrics = url, []string{url + "/metrics"}
	clock, err := timescale.New(1)
	if err != nil {
		t.Fatal(err)
	}
	var acc access
	scraper := &signal.Scraper{Targets: cfg.Recipe.Metrics, Mapping: signal.VLLM(), Client: acc.metrics.Client(probeTimeout)}
	detail, err := preflight(context.Background(), &cfg, url, acc, fixedSource(scraper, acc), clock)
	if err != nil {
		t.Fatalf("pre-flight against a server without HTTP status counters: %v", err)
	}
	if !cfg.Bar.ClientErrors {
		t.Error("bar.client_errors is still off: the steps would read errors as no data")
	}
	if n := strings.Count(detail, "counted as the client sees them"); n != 1 {
		t.Errorf("pre-flight says %d times that errors are the client's count, want once: %q", n, detail)
	}
}

// TestPreflightPrimesLazyHistograms: a server that shows its TTFT and TPOT
// histograms and request counters only after its first answer, and three
// scrapes after it, gets one priming request, and pre-flight passes on a
// later look. Before, it stopped at once; with a single look after the
// priming, it stopped on the counters llm-d-inference-sim counts late.
func TestPreflightPrimesLazyHistograms(t *testing.T) {
	cfg := config.Default()
	url, answered := lazyStandIn(t, cfg.Recipe.Model, true, 3)
	cfg.Recipe.Endpoint, cfg.Recipe.Metrics = url, []string{url + "/metrics"}
	cfg.Bar.ClientErrors = true
	clock, err := timescale.New(1)
	if err != nil {
		t.Fatal(err)
	}
	var acc access
	scraper := &signal.Scraper{Targets: cfg.Recipe.Metrics, Mapping: signal.VLLM(), Client: acc.metrics.Client(probeTimeout)}
	detail, err := preflight(context.Background(), &cfg, url, acc, fixedSource(scraper, acc), clock)
	if err != nil {
		t.Fatalf("pre-flight against a server whose histograms appear on first use: %v", err)
	}
	if answered.Load() != 1 {
		t.Errorf("%d chat completions sent, want one priming request", answered.Load())
	}
	if !strings.Contains(detail, "one priming request was sent") {
		t.Errorf("pre-flight does not say it primed the server: %q", detail)
	}
}
