package sim

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/timescale"
	dto "github.com/prometheus/client_model/go"
)

// startPersonality serves a simulator with the given personality on loopback.
func startPersonality(t *testing.T, pers string, p Profile, scale float64) (*Sim, string) {
	t.Helper()
	s, err := New(Options{Profile: p, Scale: scale, Seed: 3, Personality: pers})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

// sample scrapes url through headroom's own mapping for the personality.
func sample(t *testing.T, url string, m signal.Mapping) signal.Sample {
	t.Helper()
	sc := &signal.Scraper{Targets: []string{url + "/metrics"}, Mapping: m}
	smp, err := sc.Scrape(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(smp.Errors) > 0 {
		t.Fatalf("scrape errors: %v", smp.Errors)
	}
	return smp
}

func TestSGLangExposition(t *testing.T) {
	_, url := startPersonality(t, "sglang", tinyProfile(), 500)
	base := words("g", 0, 40)
	streamChat(t, url, "tiny-model", base, 5)
	streamChat(t, url, "tiny-model", base+" more words here", 3)

	// headroom's SGLang mapping reads every signal the bar needs.
	smp := sample(t, url, signal.SGLang())
	counters := map[string]float64{
		signal.RequestsOK:         2,
		signal.RequestsAborted:    0,
		signal.PromptTokens:       40 + 43,
		signal.PrefixCacheQueries: 40 + 43,
		signal.PrefixCacheHits:    40, // the second prompt reuses the first's 10 blocks
		signal.GenerationTokens:   8,
		signal.Preemptions:        0,
	}
	for name, want := range counters {
		if got, ok := smp.Counter[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	for name, want := range map[string]float64{signal.TTFT: 2, signal.E2E: 2, signal.Queue: 2, signal.ITL: 6} {
		if h, ok := smp.Hist[name]; !ok || h.Count != want {
			t.Errorf("%s count = %v (present %v), want %v", name, h.Count, ok, want)
		}
	}
	for _, g := range []string{signal.Running, signal.Waiting, signal.KVCacheUsage} {
		if _, ok := smp.Gauge[g]; !ok {
			t.Errorf("gauge %s missing", g)
		}
	}

	fams := scrape(t, url)
	for name := range fams {
		if strings.HasPrefix(name, "vllm:") || name == "http_requests_total" {
			t.Errorf("the sglang personality exposes %s", name)
		}
	}
	tests := []struct {
		name    string
		labels  []string
		buckets []float64
	}{
		// Tokenizer series carry only model_name.
		{"sglang:time_to_first_token_seconds", []string{"model_name", "tiny-model"}, sglangTTFTBuckets},
		// So does inter-token latency, with its fine buckets.
		{"sglang:inter_token_latency_seconds", []string{"model_name", "tiny-model"}, sglangITLBuckets},
		// Scheduler series carry the reporting rank's labels.
		{"sglang:queue_time_seconds", []string{"engine_type", "unified", "model_name", "tiny-model", "tp_rank", "0", "pp_rank", "0", "moe_ep_rank", "0"}, sglangQueueBuckets},
		{"sglang:num_running_reqs", []string{"engine_type", "unified", "tp_rank", "0", "model_name", "tiny-model"}, nil},
	}
	for _, tc := range tests {
		f, ok := fams[tc.name]
		if !ok || len(f.GetMetric()) != 1 {
			t.Errorf("%s missing or not one series", tc.name)
			continue
		}
		m := f.GetMetric()[0]
		if !hasLabels(m, tc.labels...) {
			t.Errorf("%s labels %v, want %v", tc.name, m.GetLabel(), tc.labels)
		}
		if len(m.GetLabel()) != len(tc.labels)/2 && tc.name != "sglang:num_running_reqs" {
			t.Errorf("%s has labels %v, want exactly %v", tc.name, m.GetLabel(), tc.labels)
		}
		if tc.buckets != nil {
			if got := finiteBounds(m); !slices.Equal(got, tc.buckets) {
				t.Errorf("%s buckets %v, want %v", tc.name, got, tc.buckets)
			}
		}
	}
}

// finiteBounds lists a histogram series' finite bucket bounds.
func finiteBounds(m *dto.Metric) []float64 {
	var out []float64
	for _, b := range m.GetHistogram().GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			out = append(out, b.GetUpperBound())
		}
	}
	return out
}

// TestPersonalitySchedulers: a prompt that arrives while four streams decode
// waits less under SGLang, which runs its prefill alone with the whole chunk
// budget and pauses the decodes, than under vLLM, which mixes it into the
// decode steps with what budget the decodes leave.
func TestPersonalitySchedulers(t *testing.T) {
	ttft := map[string]float64{}
	for _, tc := range []struct {
		pers    string
		mapping signal.Mapping
	}{
		// vLLM: mixed batches.
		{"vllm", signal.VLLM()},
		// SGLang: prefill first.
		{"sglang", signal.SGLang()},
	} {
		// on the virtual clock: the TTFTs compared are the model's,
		// whatever the host's load
		onVirtual(t, Options{Profile: tinyProfile(), Seed: 3, Personality: tc.pers}, func(clock *timescale.Clock, client *http.Client, url string) {
			ctx := context.Background()
			g := clock.NewGroup()
			for i := range 4 {
				g.Go(func() { streamChatWith(t, client, url, "tiny-model", words(fmt.Sprintf("d%d-", i), 0, 1000), 300) })
			}
			var before signal.Sample
			sc := &signal.Scraper{Targets: []string{url + "/metrics"}, Mapping: tc.mapping, Client: client, Sequential: true}
			for k := 0; ; k++ {
				smp, err := sc.Scrape(ctx, clock.Now())
				if err != nil || k > 10000 {
					t.Errorf("%s: four streams never decoding (%v)", tc.pers, err)
					return
				}
				if before = smp; before.Hist[signal.TTFT].Count == 4 {
					break
				}
				_ = clock.Sleep(ctx, time.Millisecond)
			}
			streamChatWith(t, client, url, "tiny-model", words("late", 0, 1000), 2)
			after, err := sc.Scrape(ctx, clock.Now())
			if err != nil {
				t.Error(err)
				return
			}
			ttft[tc.pers] = after.Hist[signal.TTFT].Sum - before.Hist[signal.TTFT].Sum
			_ = g.Wait(ctx)
		})
	}
	t.Logf("TTFT of a 1000-token prompt behind four decodes: vllm %.3fs, sglang %.3fs", ttft["vllm"], ttft["sglang"])
	if !(ttft["sglang"] < 0.75*ttft["vllm"]) {
		t.Errorf("sglang TTFT %.3fs is not well below vllm's %.3fs", ttft["sglang"], ttft["vllm"])
	}
}

// TestSGLangReservesForOutput: with a KV cache too small for four answers,
// vLLM admits all four at once and preempts; SGLang keeps room for the
// running requests' future tokens, so it retracts less.
func TestSGLangReservesForOutput(t *testing.T) {
	got := map[string]float64{}
	for _, tc := range []struct {
		pers    string
		mapping signal.Mapping
	}{
		// vLLM admits on the prompt's blocks alone.
		{"vllm", signal.VLLM()},
		// SGLang admits on the prompt plus new_token_ratio x max_tokens.
		{"sglang", signal.SGLang()},
	} {
		p := tinyProfile()
		p.MaxModelLen = 256
		p.KVCapacityTokens = 512
		s, url := startPersonality(t, tc.pers, p, 50)
		// Hold the engine until all four are queued, so both engines see
		// the same arrivals.
		if err := s.SetFaults(Faults{Stall: &Window{ForSeconds: 1e6}}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				if res := streamChat(t, url, "tiny-model", words(fmt.Sprintf("r%d-", i), 0, 40), 150); !res.done {
					t.Errorf("%s stream %d did not finish", tc.pers, i)
				}
			})
		}
		waitFor(t, "four requests queued", func() bool { return s.life.Load().inflight.Load() == 4 })
		if err := s.SetFaults(Faults{}); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		got[tc.pers] = sample(t, url, tc.mapping).Counter[signal.Preemptions]
	}
	t.Logf("preemptions: vllm %g, sglang retractions %g", got["vllm"], got["sglang"])
	if !(got["sglang"] < got["vllm"]) {
		t.Errorf("sglang retracted %g times, not fewer than vllm's %g preemptions", got["sglang"], got["vllm"])
	}
}
