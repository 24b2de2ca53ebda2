package sim

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/headroom-bench/headroom/internal/timescale"
	dto "github.com/prometheus/client_model/go"
)

// TestHostCacheTier sends eight 3000-word prompts twice, one at a time, to an
// engine whose GPU cache holds 16K tokens: the eight prefixes (24K tokens)
// overflow it, so by the second round every prefix was evicted from the GPU.
func TestHostCacheTier(t *testing.T) {
	tests := []struct {
		name      string
		hostCache int // host tier tokens (0: none)
		wantHits  bool
	}{
		// Without a host tier the second round recomputes every prompt.
		{"gpu only", 0, false},
		// With a 64K-token host tier the evicted prefixes come back from host
		// memory at 50 GB/s.
		{"host tier", 65536, true},
	}
	ttft := map[string]float64{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tinyProfile()
			p.MaxModelLen, p.MaxBatchedTokens = 4096, 4096
			p.HostCacheTokens, p.HostBandwidthBytesPerSecond = tc.hostCache, 5e10
			// on the virtual clock: the TTFTs compared are the model's,
			// whatever the host's load
			var fams map[string]*dto.MetricFamily
			onVirtual(t, Options{Profile: p, Seed: 7}, func(_ *timescale.Clock, client *http.Client, url string) {
				for round := range 2 {
					for i := range 8 {
						if res := streamChatWith(t, client, url, p.Model, words(fmt.Sprintf("h%d-", i), 0, 3000), 2); !res.done {
							t.Errorf("round %d prompt %d: no [DONE]", round, i)
							return
						}
					}
				}
				fams = scrapeWith(t, client, url)
			})
			if t.Failed() {
				return
			}
			sum, n := hist(t, fams, "vllm:time_to_first_token_seconds")
			ttft[tc.name] = sum / float64(n)
			hits := value(t, fams, "vllm:prefix_cache_hits_total")
			if tc.wantHits {
				host := value(t, fams, "headroom_sim_host_cache_hit_tokens_total")
				if !(host >= 8*2900) || hits < host {
					t.Errorf("host hits %g tokens, prefix hits %g: want the second round's ~8x3000 prompt tokens from the host, counted as prefix hits", host, hits)
				}
			} else if hits > 8*100 {
				t.Errorf("prefix hits %g tokens without a host tier: want next to none (every prefix was evicted)", hits)
			}
		})
	}
	without, with := ttft["gpu only"], ttft["host tier"]
	t.Logf("mean TTFT: GPU only %.3f s, with host tier %.3f s (modelled)", without, with)
	if !(with < 0.75*without) {
		t.Errorf("mean TTFT with the host tier %.3f s, without %.3f s: want the host tier clearly lower", with, without)
	}
}
