package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/eval"
	"github.com/headroom-bench/headroom/internal/timescale"
	dto "github.com/prometheus/client_model/go"
)

// setFaults posts faults to the admin endpoint and fails the test unless
// they are taken.
func setFaults(t *testing.T, url, faults string) {
	t.Helper()
	resp := post(t, context.Background(), url+"/admin/faults", []byte(faults))
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /admin/faults %s: status %d: %s", faults, resp.StatusCode, b)
	}
}

// waitFor polls cond every 5 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// healthStatus is /health's status, or 0 when the connection is refused.
func healthStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/health")
	if err != nil {
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("GET /health: %v (want an answer or a refused connection)", err)
		}
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func statusOf(t *testing.T, method, url string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(string(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestAdminEndpoint(t *testing.T) {
	s, err := New(Options{Profile: tinyProfile(), Scale: 100})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		remote string
		method string
		body   string
		code   int
	}{
		// IPv4 loopback may read the faults.
		{"loopback v4", "127.0.0.1:5000", "GET", "", 200},
		// IPv6 loopback may set them.
		{"loopback v6", "[::1]:5000", "POST", `{"metrics_gone":true}`, 200},
		// Anyone else is refused, even to read.
		{"remote read", "10.1.2.3:5000", "GET", "", 403},
		// Or to write.
		{"remote write", "192.168.0.9:5000", "POST", `{}`, 403},
		// Unknown fields are refused, with the reason.
		{"unknown field", "127.0.0.1:5000", "POST", `{"explode":true}`, 400},
		// Out-of-range values are refused.
		{"bad status", "127.0.0.1:5000", "POST", `{"refuse":{"share":0.5,"status":418}}`, 400},
		// A window needs a positive length.
		{"empty window", "127.0.0.1:5000", "POST", `{"stall":{"at_s":1,"for_s":0}}`, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "/admin/faults", strings.NewReader(tc.body))
			req.RemoteAddr = tc.remote
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
		})
	}
	if !s.Faults().MetricsGone {
		t.Error("faults set by a loopback client were not kept")
	}
}

func TestCrashFault(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 20)
	streamChat(t, url, "tiny-model", words("c", 0, 20), 3)
	if got := value(t, scrape(t, url), "vllm:request_success_total", "finished_reason", "length"); got != 1 {
		t.Fatalf("before the crash request_success_total{length} = %g, want 1", got)
	}
	// A long stream is open when the engine dies.
	resp := post(t, context.Background(), url+"/v1/chat/completions", chatJSON("tiny-model", words("l", 0, 10), 1900, true))
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}

	setFaults(t, url, `{"crash":{"at_s":0,"for_s":4}}`)
	rest, _ := io.ReadAll(br)
	if strings.Contains(string(rest), "[DONE]") {
		t.Error("a stream cut by the crash claimed to be complete")
	}
	waitFor(t, "connections to be refused", func() bool { return healthStatus(t, url) == 0 })
	waitFor(t, "the engine to come back", func() bool { return healthStatus(t, url) == 200 })

	fams := scrape(t, url)
	if got := value(t, fams, "vllm:request_success_total", "finished_reason", "length"); got != 0 {
		t.Errorf("after the restart request_success_total{length} = %g, want 0 (a fresh process)", got)
	}
	if _, ok := fams["http_requests_total"]; ok {
		for _, m := range fams["http_requests_total"].GetMetric() {
			if hasLabels(m, "handler", "/v1/chat/completions") {
				t.Errorf("http_requests_total for chat survived the restart: %v", m)
			}
		}
	}
	if res := streamChat(t, url, "tiny-model", words("n", 0, 10), 4); !res.done {
		t.Error("the restarted engine does not serve")
	}
}

func TestMissingMetricsFault(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 100)
	tests := []struct {
		name   string
		faults string
		code   int
		gone   string // a family that must be absent
	}{
		// One family hidden, the rest still served.
		{"one family", `{"missing_metrics":["vllm:time_to_first_token_seconds"]}`, 200, "vllm:time_to_first_token_seconds"},
		// /metrics gone altogether.
		{"all gone", `{"metrics_gone":true}`, 404, ""},
		// Cleared: everything is back.
		{"cleared", `{}`, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setFaults(t, url, tc.faults)
			if got := statusOf(t, "GET", url+"/metrics", nil); got != tc.code {
				t.Fatalf("/metrics status %d, want %d", got, tc.code)
			}
			if tc.code != 200 {
				return
			}
			fams := scrape(t, url)
			if _, ok := fams["vllm:num_requests_running"]; !ok {
				t.Error("an unrelated family went missing")
			}
			if _, ok := fams[tc.gone]; tc.gone != "" && ok {
				t.Errorf("%s is still served", tc.gone)
			}
			if _, ok := fams["vllm:time_to_first_token_seconds"]; tc.gone == "" && !ok {
				t.Error("TTFT is missing with no fault")
			}
		})
	}
}

func TestRefusalFault(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 500)
	tests := []struct {
		name   string
		status int
		share  string
		want   string // in the error message
	}{
		// Context too long, in vLLM's words.
		{"400", 400, "1", "maximum context length"},
		// Rate limited.
		{"429", 429, "1", "Too many requests"},
		// Overloaded.
		{"503", 503, "1", "overloaded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setFaults(t, url, fmt.Sprintf(`{"refuse":{"share":%s,"status":%d}}`, tc.share, tc.status))
			resp := post(t, context.Background(), url+"/v1/chat/completions", chatJSON("tiny-model", "a b c", 2, false))
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
				t.Errorf("status %d body %s, want %d with %q", resp.StatusCode, b, tc.status, tc.want)
			}
		})
	}
	// A share refuses some requests and serves the rest.
	setFaults(t, url, `{"refuse":{"share":0.5,"status":429}}`)
	refused := 0
	for range 40 {
		if statusOf(t, "POST", url+"/v1/chat/completions", chatJSON("tiny-model", "a b c", 2, false)) == 429 {
			refused++
		}
	}
	if refused == 0 || refused == 40 {
		t.Errorf("share 0.5 refused %d of 40 requests", refused)
	}
	fams := scrape(t, url)
	if got := value(t, fams, "http_requests_total", "handler", "/v1/chat/completions", "status", "4xx"); got != float64(refused+2) {
		t.Errorf("http_requests_total 4xx = %g, want %d", got, refused+2)
	}
}

func TestStallFault(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 20)
	setFaults(t, url, `{"stall":{"at_s":0,"for_s":3}}`)
	streamChat(t, url, "tiny-model", words("s", 0, 10), 3)
	sum, n := hist(t, scrape(t, url), "vllm:time_to_first_token_seconds")
	// The request arrived within a few wall milliseconds (a few tenths of a
	// modelled second at scale 20) of the stall's start.
	if n != 1 || sum < 2 {
		t.Errorf("TTFT during a 3 s stall = %.3fs over %d requests, want over 2 s", sum, n)
	}
	// After the stall, service is prompt again.
	streamChat(t, url, "tiny-model", words("t", 0, 10), 3)
	sum2, _ := hist(t, scrape(t, url), "vllm:time_to_first_token_seconds")
	if sum2-sum > 1 {
		t.Errorf("TTFT after the stall = %.3fs, want the usual few tens of ms", sum2-sum)
	}
}

func TestIgnoreDisconnectsFault(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 200)
	setFaults(t, url, `{"ignore_disconnects":true}`)
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, ctx, url+"/v1/chat/completions", chatJSON("tiny-model", words("z", 0, 50), 1000, true))
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	fams := waitMetric(t, url, "the abandoned request to finish", func(f map[string]*dto.MetricFamily) bool {
		return value(t, f, "vllm:request_success_total", "finished_reason", "length") == 1
	})
	if got := value(t, fams, "vllm:request_success_total", "finished_reason", "abort"); got != 0 {
		t.Errorf("abort counted %g times although the engine never heard of the disconnect", got)
	}
	if got := value(t, fams, "vllm:generation_tokens_total"); got != 1000 {
		t.Errorf("generation_tokens_total = %g, want all 1000 tokens generated for nobody", got)
	}
}

func TestNotReadyFault(t *testing.T) {
	s, err := New(Options{Profile: tinyProfile(), Scale: 100, Faults: Faults{NotReady: &Window{ForSeconds: 1e6}}})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		method, path string
		body         []byte
	}{
		// Not healthy.
		{"GET", "/health", nil},
		// No model list.
		{"GET", "/v1/models", nil},
		// No chat.
		{"POST", "/v1/chat/completions", chatJSON("tiny-model", "a b", 2, false)},
	}
	for _, tc := range tests {
		if got := statusOf(t, tc.method, url+tc.path, tc.body); got != 503 {
			t.Errorf("%s %s during a slow start: %d, want 503", tc.method, tc.path, got)
		}
	}
	// A short window set at run time ends on its own.
	setFaults(t, url, `{"not_ready":{"at_s":0,"for_s":5}}`)
	waitFor(t, "the slow start to end", func() bool { return healthStatus(t, url) == 200 })
	if got := statusOf(t, "GET", url+"/v1/models", nil); got != 200 {
		t.Errorf("/v1/models after the slow start: %d", got)
	}
}

func TestWrongModelFault(t *testing.T) {
	s, err := New(Options{Profile: tinyProfile(), Scale: 500, Faults: Faults{Model: "other-model", MaxModelLen: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	card := func() (string, float64) {
		resp, err := http.Get(url + "/v1/models")
		if err != nil {
			return "", 0
		}
		defer resp.Body.Close()
		var m struct {
			Data []struct {
				ID          string  `json:"id"`
				MaxModelLen float64 `json:"max_model_len"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&m) != nil || len(m.Data) == 0 {
			return "", 0
		}
		return m.Data[0].ID, m.Data[0].MaxModelLen
	}
	if id, n := card(); id != "other-model" || n != 1024 {
		t.Errorf("model card %s %g, want other-model 1024", id, n)
	}
	if got := statusOf(t, "POST", url+"/v1/chat/completions", chatJSON("tiny-model", "a b", 2, false)); got != 404 {
		t.Errorf("the profile's model: %d, want 404", got)
	}
	if got := statusOf(t, "POST", url+"/v1/chat/completions", chatJSON("other-model", words("w", 0, 1500), 2, false)); got != 400 {
		t.Errorf("1500 words against a 1024 context: %d, want 400", got)
	}
	streamChat(t, url, "other-model", "a b c", 2)
	if got := value(t, scrape(t, url), "vllm:request_success_total", "model_name", "other-model", "finished_reason", "length"); got != 1 {
		t.Errorf("metrics under the wrong model: %g requests labelled other-model, want 1", got)
	}
	// Put the right model back at run time: a redeploy.
	setFaults(t, url, `{}`)
	waitFor(t, "the redeploy", func() bool { id, _ := card(); return id == "tiny-model" })
	streamChat(t, url, "tiny-model", "a b c", 2)
}

func TestKVFillsFault(t *testing.T) {
	// The four requests must be in the engine together, which a scaled wall
	// clock does not promise on a starved host (at load 20 they ran one
	// after another and nothing was preempted): on the virtual clock they
	// start at the same modelled instant.
	var fams map[string]*dto.MetricFamily
	onVirtual(t, Options{Profile: tinyProfile(), Seed: 7, Faults: Faults{KVCapacityTokens: 512}}, func(clock *timescale.Clock, client *http.Client, url string) {
		// 512 tokens are 128 of the 4096 blocks.
		if got := value(t, scrapeWith(t, client, url), "vllm:kv_cache_usage_perc"); got < (4096.0-128)/4096 {
			t.Errorf("kv cache usage %g with the fault on: want the blocks pinned", got)
		}
		// Four requests growing to 48 blocks each cannot all fit in 128.
		g := clock.NewGroup()
		for i := range 4 {
			g.Go(func() {
				if res := streamChatWith(t, client, url, "tiny-model", words(string(rune('k'+i)), 0, 40), 150); !res.done {
					t.Errorf("stream %d did not finish", i)
				}
			})
		}
		_ = g.Wait(context.Background())
		fams = scrapeWith(t, client, url)
	})
	if got := value(t, fams, "vllm:num_preemptions_total"); got == 0 {
		t.Error("no preemption although the shrunk cache could not hold four requests")
	}
	// Cleared (on a served simulator: no timing in it): the blocks come back.
	s, url := startSim(t, tinyProfile(), fastScale)
	setFaults(t, url, `{"kv_capacity_tokens":512}`)
	waitMetric(t, url, "blocks to be pinned", func(f map[string]*dto.MetricFamily) bool {
		return value(t, f, "vllm:kv_cache_usage_perc") >= (4096.0-128)/4096
	})
	if err := s.SetFaults(Faults{}); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, url, "pinned blocks to be released", func(f map[string]*dto.MetricFamily) bool {
		return value(t, f, "vllm:kv_cache_usage_perc") == 0
	})
}

// TestMalformedToolCallsUnderLoad: with the fault at 4, the one-at-a-time
// tool suite passes, while 8 requests in the engine together all get calls
// whose arguments fail their schema.
func TestMalformedToolCallsUnderLoad(t *testing.T) {
	s, err := New(Options{Profile: tinyProfile(), Scale: 1000, Seed: 5, Faults: Faults{MalformedToolCallsAbove: 4}})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client := eval.NewClient(url, "tiny-model", eval.ClientOptions{Timeout: 30 * time.Second, Stream: true})
	defer client.Close()

	rep := eval.Run(context.Background(), client, []eval.Suite{eval.ToolSuite{}}, eval.Options{Concurrency: 1})
	if sr := rep.Suites[0]; sr.Passed != sr.Cases || sr.Verdict != eval.Pass {
		t.Errorf("one at a time: %d of %d passed (%s), want all", sr.Passed, sr.Cases, sr.Verdict)
	}

	// Hold the engine with a stall until all 8 are in, so they share it.
	setFaults(t, url, `{"malformed_tool_calls_above":4,"stall":{"at_s":0,"for_s":1e6}}`)
	cases := eval.ToolSuite{N: 8}.Cases(9)
	results := make([]eval.CaseResult, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() { results[i] = eval.RunCase(context.Background(), client, c) })
	}
	waitFor(t, "8 requests in the engine", func() bool { return s.life.Load().inflight.Load() == 8 })
	setFaults(t, url, `{"malformed_tool_calls_above":4}`)
	wg.Wait()
	for _, r := range results {
		if r.Pass || r.Class != eval.ClassSchema || !eval.Malformed(r.Class) {
			t.Errorf("case %s under load: pass=%v class %q (%s), want a schema mismatch", r.Case, r.Pass, r.Class, r.Reason)
		}
	}
}

// TestKVShrinkWindow: kv_shrink limits kv_capacity_tokens to its window, so
// a rehearsal can fill the cache mid-step; without it the shrink holds from
// the start, as before.
func TestKVShrinkWindow(t *testing.T) {
	s, err := New(Options{Profile: DefaultProfile(), Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := func(sec float64) time.Duration { return time.Duration(sec * float64(time.Second)) }
	fs, err := s.newFaultState(Faults{KVCapacityTokens: 1000, KVShrink: &Window{AtSeconds: 10, ForSeconds: 5}}, at(100))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		t    float64
		want int
	}{{105, 0}, {110, 1000}, {114.9, 1000}, {115, 0}} {
		if got := fs.kvCapacity(at(c.t)); got != c.want {
			t.Errorf("at %gs: capacity %d, want %d", c.t, got, c.want)
		}
	}
	always, _ := s.newFaultState(Faults{KVCapacityTokens: 1000}, 0)
	if always.kvCapacity(at(5)) != 1000 {
		t.Error("without kv_shrink the shrink must hold from the start")
	}
	if _, err := ParseFaults([]byte(`{"kv_shrink": {"at_s": 1, "for_s": 2}}`)); err == nil {
		t.Error("kv_shrink without kv_capacity_tokens was accepted")
	}
}
