package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/timescale"
	dto "github.com/prometheus/client_model/go"
)

// sendTogether posts one chat request per prompt at the same modelled
// instant and returns each answer's usage and finish reason, in order.
func sendTogether(t *testing.T, clock *timescale.Clock, client *http.Client, url, model string, prompts []string, maxTokens int) (usage []map[string]any, finish []string) {
	t.Helper()
	usage, finish = make([]map[string]any, len(prompts)), make([]string, len(prompts))
	g := clock.NewGroup()
	for i, p := range prompts {
		g.Go(func() {
			req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(string(chatJSON(model, p, maxTokens, false))))
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var out struct {
				Usage   map[string]any `json:"usage"`
				Choices []struct {
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) != 1 {
				t.Errorf("request %d: %d %s (%v)", i, resp.StatusCode, b, err)
				return
			}
			usage[i], finish[i] = out.Usage, out.Choices[0].FinishReason
		})
	}
	if err := g.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	return usage, finish
}

func prompts(tag string, n, nWords int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = words(fmt.Sprintf("%s%d-", tag, i), 0, nWords)
	}
	return out
}

// TestRequestSecondsHoldTheSlot: with request_seconds a request admitted
// waits that long (its slot held) before its prompt is computed; a third
// request on a two-sequence engine queues for a slot, and
// ttft_from_admission leaves that queue out of the engine's TTFT.
func TestRequestSecondsHoldTheSlot(t *testing.T) {
	for _, fromAdmission := range []bool{false, true} {
		t.Run(fmt.Sprintf("ttft_from_admission=%v", fromAdmission), func(t *testing.T) {
			p := tinyProfile()
			p.MaxNumSeqs, p.DecodeSecondsPerKVToken = 2, 0
			p.RequestSeconds, p.TTFTFromAdmission = 1, fromAdmission
			var fams map[string]*dto.MetricFamily
			onVirtual(t, Options{Profile: p, Seed: 7}, func(clock *timescale.Clock, client *http.Client, url string) {
				sendTogether(t, clock, client, url, p.Model, prompts("slot", 3, 20), 2)
				fams = scrapeWith(t, client, url)
			})
			if t.Failed() {
				return
			}
			ttft, n := hist(t, fams, "vllm:time_to_first_token_seconds")
			queue, _ := hist(t, fams, "vllm:request_queue_time_seconds")
			t.Logf("3 requests: engine TTFT sum %.3f s, queue sum %.3f s", ttft, queue)
			// two admitted at once wait 1 s, compute their prompts and answer
			// (2 tokens, ~12 and ~10 ms); the third queues ~1.02 s for a slot
			if n != 3 || !(queue > 1.0 && queue < 1.1) {
				t.Fatalf("TTFT count %d, queue sum %.3f s: want 3, and one request queued for ~1.02 s", n, queue)
			}
			want := 3.0 + queue // three 1 s waits, each request's wait counted from arrival
			if fromAdmission {
				want = 3.0
			}
			if !(ttft >= want && ttft < want+0.1) {
				t.Errorf("engine TTFT sum %.3f s: want %.2f s to %.2f s", ttft, want, want+0.1)
			}
		})
	}
}

// TestLoadSlowdownStretchesIterations: with load_slowdown 2 on a
// four-sequence engine, four requests decoding together take three times a
// lone request's time per token.
func TestLoadSlowdownStretchesIterations(t *testing.T) {
	p := tinyProfile()
	p.MaxNumSeqs, p.DecodeSecondsPerKVToken, p.LoadSlowdown = 4, 0, 2
	itl := map[int]float64{}
	for _, n := range []int{1, 4} {
		var fams map[string]*dto.MetricFamily
		onVirtual(t, Options{Profile: p, Seed: 7}, func(clock *timescale.Clock, client *http.Client, url string) {
			sendTogether(t, clock, client, url, p.Model, prompts(fmt.Sprint("load", n), n, 10), 21)
			fams = scrapeWith(t, client, url)
		})
		sum, cnt := hist(t, fams, "vllm:inter_token_latency_seconds")
		itl[n] = sum / float64(cnt)
	}
	t.Logf("mean inter-token latency: alone %.4f s, four together %.4f s", itl[1], itl[4])
	if math.Abs(itl[1]-0.010) > 1e-4 || math.Abs(itl[4]-0.030) > 3e-4 {
		t.Errorf("mean inter-token latency alone %.4f s, four together %.4f s: want 0.010 and 0.030 (1 + 2 x 3/3)", itl[1], itl[4])
	}
}

// TestAnswerFractionsShortenAnswers: answer_fractions from 10% to 50% of
// max_tokens gives vocabulary answers of 10-50 tokens of 100, ending with
// stop; without it every answer runs to max_tokens.
func TestAnswerFractionsShortenAnswers(t *testing.T) {
	for _, on := range []bool{false, true} {
		p := tinyProfile()
		if on {
			p.AnswerFractions = QuantilesOf([]float64{0.1, 0.5})
		}
		var usage []map[string]any
		var finish []string
		onVirtual(t, Options{Profile: p, Seed: 7}, func(clock *timescale.Clock, client *http.Client, url string) {
			usage, finish = sendTogether(t, clock, client, url, p.Model, prompts("ans", 40, 10), 100)
		})
		if t.Failed() {
			return
		}
		sum := 0.0
		for i, u := range usage {
			n := u["completion_tokens"].(float64)
			sum += n
			switch {
			case !on && (n != 100 || finish[i] != "length"):
				t.Errorf("without answer_fractions: answer %d has %g tokens, finish %s; want 100, length", i, n, finish[i])
			case on && (n < 10 || n > 50 || finish[i] != "stop"):
				t.Errorf("with answer_fractions [0.1, 0.5]: answer %d has %g tokens, finish %s; want 10-50, stop", i, n, finish[i])
			}
		}
		if mean := sum / float64(len(usage)); on && (mean < 22 || mean > 38) {
			t.Errorf("with answer_fractions [0.1, 0.5] the answers average %.1f tokens: want about 30", mean)
		}
	}
}

// TestNoPrefixCaching: the same prompt twice is served from the prefix
// cache the second time, unless no_prefix_caching is set.
func TestNoPrefixCaching(t *testing.T) {
	for _, off := range []bool{false, true} {
		p := tinyProfile()
		p.NoPrefixCaching = off
		var cached float64
		onVirtual(t, Options{Profile: p, Seed: 7}, func(clock *timescale.Clock, client *http.Client, url string) {
			prompt := prompts("cache", 1, 400)
			sendTogether(t, clock, client, url, p.Model, prompt, 2)
			u, _ := sendTogether(t, clock, client, url, p.Model, prompt, 2)
			cached = u[0]["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
		})
		if off && cached != 0 || !off && cached < 390 {
			t.Errorf("no_prefix_caching=%v: the repeated 400-token prompt had %g tokens cached", off, cached)
		}
	}
}

// TestWithArgs: the engine arguments the simulator models are read from a
// recipe's args, the rest left alone; a bad value is an error.
func TestWithArgs(t *testing.T) {
	p := DefaultProfile()
	q, set, err := p.WithArgs([]string{"--max-model-len", "65536", "--max-num-seqs", "16", "--max-num-batched-tokens=2048", "--no-enable-prefix-caching"})
	if err != nil {
		t.Fatal(err)
	}
	if q.MaxNumSeqs != 16 || q.MaxBatchedTokens != 2048 || !q.NoPrefixCaching || q.MaxModelLen != p.MaxModelLen || len(set) != 3 {
		t.Errorf("WithArgs: max_num_seqs %d, max_batched_tokens %d, no_prefix_caching %v, max_model_len %d, set %q",
			q.MaxNumSeqs, q.MaxBatchedTokens, q.NoPrefixCaching, q.MaxModelLen, set)
	}
	if q, _, _ := p.WithArgs([]string{"--max-running-requests", "8"}); q.MaxNumSeqs != 8 {
		t.Errorf("SGLang's --max-running-requests 8 set max_num_seqs %d", q.MaxNumSeqs)
	}
	if _, _, err := p.WithArgs([]string{"--max-num-seqs", "lots"}); err == nil || !strings.Contains(err.Error(), "--max-num-seqs") {
		t.Errorf("--max-num-seqs lots: err %v, want one naming the flag", err)
	}
	if q, set, _ := p.WithArgs(nil); q.MaxNumSeqs != p.MaxNumSeqs || len(set) != 0 {
		t.Errorf("no args changed %q", set)
	}
}

// TestTermsInProfileFile: the terms read back from a profile file, the
// answer quantiles interpolated to every 5%; a term left out is off.
func TestTermsInProfileFile(t *testing.T) {
	p, err := ParseProfile([]byte(`model: m
max_model_len: 2048
block_size: 16
kv_capacity_tokens: 65536
max_num_seqs: 8
max_batched_tokens: 2048
prefill_tokens_per_second: 10000
decode_base_seconds: 0.01
request_seconds: 2.5
load_slowdown: 2
ttft_from_admission: true
answer_fractions: [0.1, 0.3, 1]
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	if p.RequestSeconds != 2.5 || p.LoadSlowdown != 2 || !p.TTFTFromAdmission || p.NoPrefixCaching {
		t.Errorf("terms read back as %+v", p.Terms)
	}
	if q := p.AnswerFractions; q[0] != 0.1 || math.Abs(q[10]-0.3) > 1e-12 || q[20] != 1 || math.Abs(q[5]-0.2) > 1e-12 {
		t.Errorf("answer_fractions [0.1, 0.3, 1] read as %v", q)
	}
	if _, err := ParseProfile([]byte("answer_fractions: [0.5]\n"), "test"); err == nil {
		t.Error("one answer fraction was accepted")
	}
	if DefaultProfile().Terms != (Terms{}) {
		t.Error("the default profile has a term on")
	}
}
