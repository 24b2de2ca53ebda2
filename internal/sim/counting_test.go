package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// registryValue is the value of the first sample of a counter or gauge on a
// simulator's registry (0 when it has no such family), read without HTTP.
func registryValue(t *testing.T, s *Sim, name string) float64 {
	t.Helper()
	fams, err := s.life.Load().met.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name || len(f.GetMetric()) == 0 {
			continue
		}
		m := f.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// blockHashes returns n made-up block hashes numbered from first.
func blockHashes(first, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = mix64(uint64(first + i + 1))
	}
	return out
}

// TestCacheCountersMoment pins when each cache counter moves, on a virtual
// clock: vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total
// together when a request is admitted (vLLM records both at admission), and
// vllm:prompt_tokens_total and vllm:prompt_tokens_cached_total together when
// its first token is sampled (vLLM's output processor counts both then). A
// ratio of two counters counted at the same moment stays in [0, 1] over any
// window; hits over prompt tokens does not while a long prefill straddles
// the window's edge.
func TestCacheCountersMoment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Options{Profile: tinyProfile(), Scale: 1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = s.Run(ctx) }()
		synctest.Wait()
		run := func(r *request) {
			if err := s.submit(s.life.Load(), r); err != nil {
				t.Fatal(err)
			}
			for have := 0; have < r.maxTokens; {
				if have, err = s.waitTokens(ctx, r, have); err != nil {
					t.Fatal(err)
				}
			}
		}
		// 600 tokens (150 blocks of 4) to warm the cache.
		run(&request{id: 1, prompt: 600, maxTokens: 2, hashes: blockHashes(0, 150), notify: s.clock.NewSignal()})
		// The same 600 and 1000 more: admitted with 600 hits, then its
		// prefill takes four 256-token chunks of 35.6 ms each.
		r2 := &request{id: 2, prompt: 1600, maxTokens: 2, hashes: append(blockHashes(0, 150), blockHashes(150, 250)...), notify: s.clock.NewSignal()}
		if err := s.submit(s.life.Load(), r2); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // mid-prefill
		synctest.Wait()
		type counts struct{ queries, hits, prompt, cached float64 }
		read := func() counts {
			return counts{
				registryValue(t, s, "vllm:prefix_cache_queries_total"), registryValue(t, s, "vllm:prefix_cache_hits_total"),
				registryValue(t, s, "vllm:prompt_tokens_total"), registryValue(t, s, "vllm:prompt_tokens_cached_total"),
			}
		}
		if got, want := read(), (counts{600 + 1600, 600, 600, 0}); got != want {
			t.Errorf("mid-prefill: queries, hits, prompt, cached = %v, want %v (lookups at admission, prompt tokens at the first token)", got, want)
		}
		for have := 0; have < r2.maxTokens; {
			if have, err = s.waitTokens(ctx, r2, have); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := read(), (counts{2200, 600, 2200, 600}); got != want {
			t.Errorf("after the first token: queries, hits, prompt, cached = %v, want %v", got, want)
		}
		cancel()
	})
}

// TestPrefixCacheCountedOncePerRequest: requests preempted and admitted
// again are looked up in the prefix cache once each in
// vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total (vLLM
// records a preempted request's new lookups apart, unexported), so over the
// run the hits are the cached tokens the answers report and never exceed the
// prompt tokens. Counting every re-admission read hits of 386% of the prompt
// tokens on a short step with the KV cache shrunk.
func TestPrefixCacheCountedOncePerRequest(t *testing.T) {
	p := tinyProfile()
	p.MaxModelLen = 256
	p.KVCapacityTokens = 256 // 64 blocks: four requests growing to 48 blocks each cannot all fit
	s, url := startSim(t, p, 50)
	shared := words("shared", 0, 20)
	prompts, cached := 0.0, 0.0
	add := func(r streamResult) {
		prompts += r.usage["prompt_tokens"].(float64)
		cached += r.usage["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
	}
	// Warm the shared 20-word prefix (5 blocks), then hold the engine until
	// four requests that share it are queued, so they start together.
	add(streamChat(t, url, "tiny-model", shared+" "+words("warm", 0, 20), 2))
	if err := s.SetFaults(Faults{Stall: &Window{ForSeconds: 1e6}}); err != nil {
		t.Fatal(err)
	}
	results := make([]streamResult, 4)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			results[i] = streamChat(t, url, "tiny-model", shared+" "+words(fmt.Sprintf("r%d-", i), 0, 20), 150)
		})
	}
	waitFor(t, "four requests queued", func() bool { return s.life.Load().inflight.Load() == 4 })
	if err := s.SetFaults(Faults{}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, r := range results {
		add(r)
	}
	fams := scrape(t, url)
	if got := value(t, fams, "vllm:num_preemptions_total"); got == 0 {
		t.Fatal("no preemption: the test needs requests admitted again")
	}
	if got := value(t, fams, "vllm:prefix_cache_queries_total"); got != prompts {
		t.Errorf("prefix_cache_queries_total = %g, want the %g prompt tokens (one lookup per request)", got, prompts)
	}
	if got := value(t, fams, "vllm:prefix_cache_hits_total"); got != cached || cached != 4*20 {
		t.Errorf("prefix_cache_hits_total = %g, want the %g cached tokens the answers report (4 x 20)", got, cached)
	}
	if got := value(t, fams, "vllm:prompt_tokens_total"); got != prompts {
		t.Errorf("prompt_tokens_total = %g, want %g", got, prompts)
	}
	if got := value(t, fams, "vllm:prompt_tokens_cached_total"); got != cached {
		t.Errorf("prompt_tokens_cached_total = %g, want %g", got, cached)
	}
	src := func(s string) float64 { return value(t, fams, "vllm:prompt_tokens_by_source_total", "source", s) }
	if hit, comp, ext := src("local_cache_hit"), src("local_compute"), src("external_kv_transfer"); hit != cached || comp != prompts-cached || ext != 0 {
		t.Errorf("prompt_tokens_by_source: cache hit %g, compute %g, external %g; want %g, %g, 0", hit, comp, ext, cached, prompts-cached)
	}
}
