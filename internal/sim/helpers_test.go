package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/timescale"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// tinyProfile is small and fast: 10 ms base iterations, 1 s of prefill per 10K
// tokens, and a decode step that grows 10 ms per 1000 tokens of context.
func tinyProfile() Profile {
	return Profile{
		Name:                    "tiny",
		Model:                   "tiny-model",
		MaxModelLen:             2048,
		BlockSize:               4,
		KVCapacityTokens:        16384,
		MaxNumSeqs:              16,
		MaxBatchedTokens:        256,
		PrefillTokensPerSecond:  10000,
		DecodeBaseSeconds:       0.010,
		DecodeSecondsPerKVToken: 1e-5,
	}
}

// startSim serves a simulator on loopback for the test's lifetime.
func startSim(t testing.TB, p Profile, scale float64) (*Sim, string) {
	t.Helper()
	s, err := New(Options{Profile: p, Scale: scale, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, url
}

// words returns n distinct words starting at word number from, tagged so two
// tags never share a block.
func words(tag string, from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s%d", tag, from+i)
	}
	return b.String()
}

type chatBody struct {
	Model         string            `json:"model"`
	Messages      []json.RawMessage `json:"messages"`
	MaxTokens     int               `json:"max_tokens,omitempty"`
	Stream        bool              `json:"stream"`
	StreamOptions map[string]bool   `json:"stream_options,omitempty"`
}

func userMessage(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"role": "user", "content": text})
	return b
}

func chatJSON(model, prompt string, maxTokens int, stream bool) []byte {
	body := chatBody{Model: model, Messages: []json.RawMessage{userMessage(prompt)}, MaxTokens: maxTokens, Stream: stream}
	if stream {
		body.StreamOptions = map[string]bool{"include_usage": true}
	}
	b, _ := json.Marshal(body)
	return b
}

func post(t testing.TB, ctx context.Context, url string, body []byte) *http.Response {
	t.Helper()
	return postWith(t, http.DefaultClient, ctx, url, body)
}

// postWith is post through client (an in-memory network's, on a virtual
// clock).
func postWith(t testing.TB, client *http.Client, ctx context.Context, url string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// streamResult is what a client saw of one streamed answer.
type streamResult struct {
	chunks  []map[string]any // every data: line but [DONE], in order
	done    bool             // saw data: [DONE] last
	content string
	usage   map[string]any
}

// streamChat sends a streaming request and reads the whole answer.
func streamChat(t testing.TB, url, model, prompt string, maxTokens int) streamResult {
	t.Helper()
	return streamChatWith(t, http.DefaultClient, url, model, prompt, maxTokens)
}

// streamChatWith is streamChat through client.
func streamChatWith(t testing.TB, client *http.Client, url, model, prompt string, maxTokens int) streamResult {
	t.Helper()
	resp := postWith(t, client, context.Background(), url+"/v1/chat/completions", chatJSON(model, prompt, maxTokens, true))
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var res streamResult
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line without data: prefix: %q", line)
		}
		if res.done {
			t.Fatalf("data after [DONE]: %q", line)
		}
		if data == "[DONE]" {
			res.done = true
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk is not JSON: %v: %q", err, data)
		}
		res.chunks = append(res.chunks, c)
		if u, ok := c["usage"].(map[string]any); ok {
			res.usage = u
		}
		for _, ch := range c["choices"].([]any) {
			delta := ch.(map[string]any)["delta"].(map[string]any)
			if s, ok := delta["content"].(string); ok {
				res.content += s
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return res
}

// scrape reads /metrics with the text parser.
func scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	return scrapeWith(t, http.DefaultClient, url)
}

// scrapeWith is scrape through client.
func scrapeWith(t testing.TB, client *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value is the value of the first sample of a counter or gauge family whose
// labels include want.
func value(t testing.TB, fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("metric %s missing", name)
	}
	for _, m := range f.GetMetric() {
		if hasLabels(m, want...) {
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("metric %s has no sample with labels %v", name, want)
	return 0
}

func hasLabels(m *dto.Metric, kv ...string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// hist is the sum and count of a histogram family's only series.
func hist(t testing.TB, fams map[string]*dto.MetricFamily, name string) (sum float64, count uint64) {
	t.Helper()
	f, ok := fams[name]
	if !ok || len(f.GetMetric()) == 0 {
		t.Fatalf("histogram %s missing", name)
	}
	h := f.GetMetric()[0].GetHistogram()
	return h.GetSampleSum(), h.GetSampleCount()
}

// waitMetric polls /metrics until cond holds, for up to 10 s.
func waitMetric(t testing.TB, url string, what string, cond func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams := scrape(t, url)
		if cond(fams) {
			return fams
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// onVirtual serves a simulator made from opts on a virtual clock's
// in-memory network and runs f against it on that clock, so the latencies
// f reads are the model's whatever the host's load. f runs in the test's
// goroutine; goroutines it starts must start on clock.
func onVirtual(t *testing.T, opts Options, f func(clock *timescale.Clock, client *http.Client, url string)) {
	t.Helper()
	clock := timescale.NewVirtual()
	net := memnet.New(clock)
	opts.Clock, opts.Net = clock, net
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	clock.Run(func() {
		defer s.Close()
		url, err := s.Start("")
		if err != nil {
			t.Error(err)
			return
		}
		f(clock, net.Client(), url)
	})
}
