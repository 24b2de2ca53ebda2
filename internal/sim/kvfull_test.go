package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/headroom-bench/headroom/internal/signal"
)

// modelledNow is the simulator's modelled clock as /admin/faults reports it.
func modelledNow(t *testing.T, url string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/admin/faults")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Now float64 `json:"now_s"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("GET /admin/faults: %v: %s", err, b)
	}
	return st.Now
}

// TestKVFillsMidRun reproduces "the KV cache fills mid-step": three streams
// decode, then kv_capacity_tokens is lowered through /admin/faults below what
// any of them needs. The engine preempts them all and can admit none again,
// so the gauges read running 0 and waiting 3 with the cache near full, and
// no token is generated and no TTFT observed for as long as the fault holds
// (checked over 10 modelled seconds). Clearing the fault lets all three
// finish. Both personalities behave alike.
func TestKVFillsMidRun(t *testing.T) {
	for _, tc := range []struct {
		pers    string
		mapping signal.Mapping
	}{
		{"vllm", signal.VLLM()},
		{"sglang", signal.SGLang()},
	} {
		t.Run(tc.pers, func(t *testing.T) {
			s, url := startPersonality(t, tc.pers, tinyProfile(), 50)
			var wg sync.WaitGroup
			results := make([]streamResult, 3)
			for i := range results {
				wg.Go(func() { results[i] = streamChat(t, url, "tiny-model", words(fmt.Sprintf("kv%d-", i), 0, 40), 1500) })
			}
			waitFor(t, "three streams decoding", func() bool {
				smp := sample(t, url, tc.mapping)
				return smp.Gauge[signal.Running] == 3 && smp.Hist[signal.TTFT].Count == 3
			})
			// 16 tokens (4 blocks) hold no 40-token prompt.
			setFaults(t, url, `{"kv_capacity_tokens":16}`)
			waitFor(t, "running 0, waiting 3", func() bool {
				smp := sample(t, url, tc.mapping)
				return smp.Gauge[signal.Running] == 0 && smp.Gauge[signal.Waiting] == 3
			})
			stuck := sample(t, url, tc.mapping)
			iterations := registryValue(t, s, "headroom_sim_iterations_total")
			until := modelledNow(t, url) + 10
			waitFor(t, "10 modelled seconds", func() bool { return modelledNow(t, url) >= until })
			later := sample(t, url, tc.mapping)
			if r, w := later.Gauge[signal.Running], later.Gauge[signal.Waiting]; r != 0 || w != 3 {
				t.Errorf("10 s into the fault: running %g, waiting %g; want 0 and 3", r, w)
			}
			if u := later.Gauge[signal.KVCacheUsage]; u < 0.99 {
				t.Errorf("KV cache usage %g with the cache shrunk to 4 of 4096 blocks, want near 1", u)
			}
			if got := registryValue(t, s, "headroom_sim_iterations_total"); got != iterations {
				t.Errorf("the engine ran %g iterations while nothing fit", got-iterations)
			}
			if a, b := stuck.Counter[signal.GenerationTokens], later.Counter[signal.GenerationTokens]; a != b {
				t.Errorf("generation tokens went from %g to %g while nothing ran", a, b)
			}
			if a, b := stuck.Hist[signal.TTFT].Count, later.Hist[signal.TTFT].Count; a != b {
				t.Errorf("TTFT observations went from %g to %g while nothing ran", a, b)
			}
			setFaults(t, url, `{}`)
			wg.Wait()
			for i, r := range results {
				if !r.done || r.usage["completion_tokens"] != 1500.0 {
					t.Errorf("stream %d after the fault cleared: done=%v, usage %v", i, r.done, r.usage)
				}
			}
		})
	}
}
