package sim

import (
	"fmt"
	"sync"
	"testing"
)

// pdProfile is the tiny engine with room for 4000-token agent turns and the
// default profile's KV size per token (~377 KB).
func pdProfile() Profile {
	p := tinyProfile()
	p.MaxModelLen, p.KVCapacityTokens, p.MaxBatchedTokens = 8192, 65536, 2048
	p.KVBytesPerToken = DefaultKVBytesPerToken
	return p
}

// lightSessions runs three agent sessions of four turns each (prompts
// growing 1000 words a turn, 8-token answers) against url at once.
func lightSessions(t *testing.T, url, model string) {
	t.Helper()
	var wg sync.WaitGroup
	for s := range 3 {
		wg.Go(func() {
			for turn := 1; turn <= 4; turn++ {
				res := streamChat(t, url, model, words(fmt.Sprintf("pd%d-", s), 0, 1000*turn), 8)
				if !res.done {
					t.Errorf("session %d turn %d: stream ended without [DONE]", s, turn)
				}
			}
		})
	}
	wg.Wait()
}

// meanGatewayTTFT is the mean of the gateway's gen_ai TTFT histogram.
func meanGatewayTTFT(t *testing.T, url string) float64 {
	t.Helper()
	sum, n := hist(t, scrape(t, url), "gen_ai_server_time_to_first_token_seconds")
	if n == 0 {
		t.Fatal("the gateway observed no time to first token")
	}
	return sum / float64(n)
}

// phaseSum sums a counter family over the series of one phase.
func phaseSum(t *testing.T, url, name, phase string) float64 {
	t.Helper()
	total := 0.0
	for _, m := range scrape(t, url)[name].GetMetric() {
		if hasLabels(m, "phase", phase) {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// TestDisaggregatedLink runs the same three light sessions through a
// prefill/decode split over a 10 GbE TCP link and over an RDMA link. Each
// turn moves its whole prompt's KV (up to 4000 tokens x 377 KB = 1.5 GB):
// 1.2 s a turn over TCP, queued behind the other sessions' transfers, so
// TTFT explodes as in the reference report's recipe 4; over RDMA a
// transfer takes 30 ms and TTFT stays near the prefill time.
func TestDisaggregatedLink(t *testing.T) {
	links := []struct {
		name string
		bps  float64
	}{
		{"tcp-10gbe", 1.25e9}, // plain TCP on 10 GbE
		{"rdma", 5e10},        // RDMA
	}
	ttft := map[string]float64{}
	for _, link := range links {
		t.Run(link.name, func(t *testing.T) {
			c, err := NewCluster(ClusterOptions{
				// scale 10: a wall millisecond of HTTP reads as 10 modelled ms,
				// not 50, so a busy or -race host does not bury the link
				Options:       Options{Profile: pdProfile(), Scale: 10, Seed: 3},
				Copies:        2,
				Disaggregated: &Disaggregation{LinkBytesPerSecond: link.bps},
			})
			if err != nil {
				t.Fatal(err)
			}
			url, err := c.Start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			lightSessions(t, url, "tiny-model")
			ttft[link.name] = meanGatewayTTFT(t, url)
			// Every request was prefilled once and decoded once, each engine
			// labelled with its phase.
			if got := phaseSum(t, url, "vllm:request_success_total", "prefill"); got != 12 {
				t.Errorf("prefill engine finished %g requests, want 12", got)
			}
			if got := phaseSum(t, url, "vllm:request_success_total", "decode"); got != 12 {
				t.Errorf("decode engines finished %g requests, want 12", got)
			}
			// The link moved each prompt's KV: prompt tokens x KV bytes per token.
			prompts := phaseSum(t, url, "vllm:prompt_tokens_total", "prefill")
			fams := scrape(t, url)
			if got, want := value(t, fams, "headroom_sim_kv_transfer_bytes_total"), prompts*DefaultKVBytesPerToken; got != want {
				t.Errorf("kv bytes moved %g, want %g (%g prompt tokens)", got, want, prompts)
			}
		})
	}
	slow, fast := ttft["tcp-10gbe"], ttft["rdma"]
	t.Logf("mean gateway TTFT: TCP %.3f s, RDMA %.3f s (modelled)", slow, fast)
	// The link's cost is the difference: wall-clock overhead on the scaled
	// clock adds to both alike, so a ratio would read the host's load.
	if !(slow > 1) || !(slow-fast > 0.8) {
		t.Errorf("mean TTFT over TCP %.3f s, over RDMA %.3f s: want TCP above 1 s and at least 0.8 s more than RDMA", slow, fast)
	}
	if !(fast < 0.5) {
		t.Errorf("mean TTFT over RDMA %.3f s: want under 0.5 s", fast)
	}
}
