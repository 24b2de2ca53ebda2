package sim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/timescale"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// pdProfile is the tiny engine with room for 4000-token agent turns and the
// default profile's KV size per token (~377 KB).
func pdProfile() Profile {
	p := tinyProfile()
	p.MaxModelLen, p.KVCapacityTokens, p.MaxBatchedTokens = 8192, 65536, 2048
	p.KVBytesPerToken = DefaultKVBytesPerToken
	return p
}

// lightSessionsOn runs three agent sessions of four turns each (prompts
// growing 1000 words a turn, 8-token answers) against url at once, on the
// virtual clock, and returns the gateway's /metrics once they are done.
func lightSessionsOn(t *testing.T, clock *timescale.Clock, client *http.Client, url, modelID string) map[string]*dto.MetricFamily {
	t.Helper()
	g := clock.NewGroup()
	for s := range 3 {
		g.Go(func() {
			for turn := 1; turn <= 4; turn++ {
				body := chatJSON(modelID, words(fmt.Sprintf("pd%d-", s), 0, 1000*turn), 8, true)
				resp, err := client.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Errorf("session %d turn %d: %v", s, turn, err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("data: [DONE]")) {
					t.Errorf("session %d turn %d: status %d, %v: stream ended without [DONE]", s, turn, resp.StatusCode, err)
					return
				}
			}
		})
	}
	_ = g.Wait(context.Background())
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Errorf("parse /metrics: %v", err)
	}
	return fams
}

// meanTTFT is the mean of the gateway's gen_ai TTFT histogram.
func meanTTFT(t *testing.T, fams map[string]*dto.MetricFamily) float64 {
	t.Helper()
	sum, n := hist(t, fams, "gen_ai_server_time_to_first_token_seconds")
	if n == 0 {
		t.Fatal("the gateway observed no time to first token")
	}
	return sum / float64(n)
}

// phaseTotal sums a counter family over the series of one phase.
func phaseTotal(fams map[string]*dto.MetricFamily, name, phase string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		if hasLabels(m, "phase", phase) {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// TestDisaggregatedLink runs the same three light sessions through a
// prefill/decode split over a 10 GbE TCP link and over an RDMA link, on the
// virtual clock (so no host load reaches the latencies). Each turn moves
// its whole prompt's KV (up to 4000 tokens x 377 KB = 1.5 GB): 1.2 s a
// turn over TCP, queued behind the other sessions' transfers, so TTFT
// explodes as in the reference report's recipe 4; over RDMA a transfer
// takes 30 ms and TTFT stays near the prefill time.
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
			clock := timescale.NewVirtual()
			net := memnet.New(clock)
			c, err := NewCluster(ClusterOptions{
				Options:       Options{Profile: pdProfile(), Clock: clock, Net: net, Seed: 3},
				Copies:        2,
				Disaggregated: &Disaggregation{LinkBytesPerSecond: link.bps},
			})
			if err != nil {
				t.Fatal(err)
			}
			var fams map[string]*dto.MetricFamily
			clock.Run(func() {
				url, err := c.Start("")
				if err != nil {
					t.Error(err)
					return
				}
				fams = lightSessionsOn(t, clock, net.Client(), url, "tiny-model")
				if err := c.Close(); err != nil {
					t.Error(err)
				}
			})
			if t.Failed() {
				return
			}
			ttft[link.name] = meanTTFT(t, fams)
			// Every request was prefilled once and decoded once, each engine
			// labelled with its phase.
			if got := phaseTotal(fams, "vllm:request_success_total", "prefill"); got != 12 {
				t.Errorf("prefill engine finished %g requests, want 12", got)
			}
			if got := phaseTotal(fams, "vllm:request_success_total", "decode"); got != 12 {
				t.Errorf("decode engines finished %g requests, want 12", got)
			}
			// The link moved each prompt's KV: prompt tokens x KV bytes per token.
			prompts := phaseTotal(fams, "vllm:prompt_tokens_total", "prefill")
			if got, want := value(t, fams, "headroom_sim_kv_transfer_bytes_total"), prompts*DefaultKVBytesPerToken; got != want {
				t.Errorf("kv bytes moved %g, want %g (%g prompt tokens)", got, want, prompts)
			}
		})
	}
	slow, fast := ttft["tcp-10gbe"], ttft["rdma"]
	t.Logf("mean gateway TTFT: TCP %.3f s, RDMA %.3f s (modelled)", slow, fast)
	if !(slow > 1) || !(slow-fast > 0.8) {
		t.Errorf("mean TTFT over TCP %.3f s, over RDMA %.3f s: want TCP above 1 s and at least 0.8 s more than RDMA", slow, fast)
	}
	if !(fast < 0.5) {
		t.Errorf("mean TTFT over RDMA %.3f s: want under 0.5 s", fast)
	}
}
