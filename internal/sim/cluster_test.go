package sim

import (
	"fmt"
	"sync"
	"testing"

	"github.com/headroom-bench/headroom/internal/signal"
)

// startCluster serves copies of the tiny profile behind a gateway.
func startCluster(t *testing.T, copies int, router string, scale float64) (*Cluster, string) {
	t.Helper()
	c, err := NewCluster(ClusterOptions{Options: Options{Profile: tinyProfile(), Scale: scale, Seed: 1}, Copies: copies, Router: router})
	if err != nil {
		t.Fatal(err)
	}
	url, err := c.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c, url
}

// perCopy is each copy's finished requests, read off the gateway's /metrics.
func perCopy(t *testing.T, url string, copies int) []float64 {
	t.Helper()
	out := make([]float64, copies)
	for _, m := range scrape(t, url)["vllm:request_success_total"].GetMetric() {
		for i := range copies {
			if hasLabels(m, "copy", fmt.Sprint(i), "finished_reason", "length") {
				out[i] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func TestClusterRouters(t *testing.T) {
	tests := []struct {
		name   string
		router string
		scale  float64
		check  func(t *testing.T, c *Cluster, url string)
	}{
		// Round robin: six requests over three copies, two each.
		{"round robin", RoundRobin, 500, func(t *testing.T, c *Cluster, url string) {
			for i := range 6 {
				streamChat(t, url, "tiny-model", words(fmt.Sprintf("rr%d-", i), 0, 20), 2)
			}
			if got := perCopy(t, url, 3); got[0] != 2 || got[1] != 2 || got[2] != 2 {
				t.Errorf("requests per copy %v, want 2 each", got)
			}
		}},
		// Least loaded: while one copy holds a long stream, short requests go
		// elsewhere. At x20 the long stream (1,500 tokens of 10 ms) holds its
		// copy for 0.75 s of wall time, far past the four short requests
		// even under the race detector (at x500 it was 30 ms, and they
		// sometimes outlasted it).
		{"least loaded", LeastLoaded, 20, func(t *testing.T, c *Cluster, url string) {
			var wg sync.WaitGroup
			wg.Go(func() { streamChat(t, url, "tiny-model", words("long", 0, 20), 1500) })
			busy := -1
			waitFor(t, "the long stream to be in a copy", func() bool {
				for i := range 3 {
					if c.Copy(i).life.Load().inflight.Load() == 1 {
						busy = i
						return true
					}
				}
				return false
			})
			for i := range 4 {
				streamChat(t, url, "tiny-model", words(fmt.Sprintf("ll%d-", i), 0, 20), 2)
			}
			if got := perCopy(t, url, 3); got[busy] != 0 {
				t.Errorf("requests per copy %v: the busy copy %d got short requests", got, busy)
			}
			wg.Wait()
		}},
		// Prefix affinity: each session's growing turns land on one copy and
		// hit its cache (two sessions over three copies: round robin would
		// send every turn to another copy).
		{"prefix affinity", PrefixAffinity, 500, func(t *testing.T, c *Cluster, url string) {
			for turn := range 3 {
				for sess := range 2 {
					res := streamChat(t, url, "tiny-model", words(fmt.Sprintf("s%d-", sess), 0, 200+100*turn), 2)
					cached := res.usage["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
					if turn > 0 && cached < float64(200+100*(turn-1))-4 {
						t.Errorf("session %d turn %d: %g cached tokens, want the previous turn's prompt", sess, turn, cached)
					}
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, url := startCluster(t, 3, tc.router, tc.scale)
			tc.check(t, c, url)
		})
	}
}

func TestClusterGatewayMetrics(t *testing.T) {
	c, url := startCluster(t, 2, RoundRobin, 500)
	for i := range 4 {
		streamChat(t, url, "tiny-model", words(fmt.Sprintf("g%d-", i), 0, 30), 5)
	}
	// Copy 1 refuses everything: the next request routed there is a 429.
	if err := c.Copy(1).SetFaults(Faults{Refuse: &Refusals{Share: 1, Status: 429}}); err != nil {
		t.Fatal(err)
	}
	// Round robin: the fifth request goes to copy 0, the sixth to copy 1.
	for i, want := range []int{200, 429} {
		if got := statusOf(t, "POST", url+"/v1/chat/completions", chatJSON("tiny-model", "a b c", 2, true)); got != want {
			t.Errorf("request %d: status %d, want %d", 5+i, got, want)
		}
	}

	gen := sample(t, url, signal.GenAI())
	wants := map[string]float64{signal.RequestsOK: 5, signal.HTTP4xx: 1, signal.PromptTokens: 4*30 + 3, signal.GenerationTokens: 4*5 + 2}
	for name, want := range wants {
		if got := gen.Counter[name]; got != want {
			t.Errorf("gen_ai %s = %g, want %g", name, got, want)
		}
	}
	if h := gen.Hist[signal.TTFT]; h.Count != 5 {
		t.Errorf("gateway TTFT count %g, want 5", h.Count)
	}
	if h := gen.Hist[signal.TPOT]; h.Count != 5 {
		t.Errorf("gateway TPOT count %g, want 5", h.Count)
	}
	// The engines' own series, summed over both copies.
	eng := sample(t, url, signal.VLLM())
	if got := eng.Counter[signal.RequestsOK]; got != 5 {
		t.Errorf("engines' requests ok = %g, want 5 over both copies", got)
	}
	// Faults go to one copy through the gateway.
	if got := statusOf(t, "GET", url+"/admin/faults", nil); got != 400 {
		t.Errorf("admin without a copy: %d, want 400", got)
	}
	if got := statusOf(t, "POST", url+"/admin/faults?copy=1", []byte(`{}`)); got != 200 {
		t.Errorf("admin for copy 1: %d, want 200", got)
	}
	if c.Copy(1).Faults().Refuse != nil {
		t.Error("clearing copy 1's faults through the gateway did not reach it")
	}
}
