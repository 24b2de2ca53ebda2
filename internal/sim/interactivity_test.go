package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// timedStream is what a client saw of one streamed answer, with times.
type timedStream struct {
	chunks      atomic.Int64  // content chunks received so far
	first, last time.Duration // clock times of the first and last content chunk
	tokens      int           // completion tokens, from the final usage chunk
	err         error
}

// read sends a streaming chat request through client and reads the answer,
// counting chunks and stamping them on clock.
func (s *timedStream) read(ctx context.Context, clock *timescale.Clock, client *http.Client, url, prompt string, maxTokens int) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(chatJSON("tiny-model", prompt, maxTokens, true)))
	if err != nil {
		s.err = err
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		s.err = err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.err = fmt.Errorf("status %d", resp.StatusCode)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			s.err = err
			return
		}
		if c.Usage != nil {
			s.tokens = c.Usage.CompletionTokens
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			now := clock.Now()
			if s.chunks.Load() == 0 {
				s.first = now
			}
			s.last = now
			s.chunks.Add(1)
		}
	}
	s.err = sc.Err()
}

// TestSGLangInteractivityPerRequest: four streams decode on the SGLang
// personality while long prompts arrive one at a time, each after about 15
// more tokens of the streams. SGLang runs a prefill batch alone, so every
// prompt stops the decodes for 0.84 s: about one token in 16 to 25 waits
// that long and the rest come 9 ms apart. The per-token P90 (9 ms, over 100
// tokens/s) passes a 60 tokens/s bar; each stream's own speed (about 25
// tokens/s; it would pass only with over 100 tokens between prompts) fails
// it. The step is judged on the per-request figure, derived from the
// per-token histogram's sum and count, and it fails. Before interactivity
// was derived per request, this step passed on the per-token P90.
func TestSGLangInteractivityPerRequest(t *testing.T) {
	const (
		streams   = 4
		answer    = 700  // tokens per stream
		prompt    = 1900 // words (tokens) per long prompt: 8 prefill chunks
		perPrompt = 15   // stream chunks between long prompts
		perScrape = 3    // long prompts per window
		bar       = 60.0 // tokens/s per user
	)
	p := tinyProfile()
	p.DecodeSecondsPerKVToken = 0 // every decode step 9 ms, whatever the context
	p.DecodeBaseSeconds = 0.009
	p.PrefillTokensPerSecond = 2500 // a long prompt stops the decodes for 0.84 s
	// on the virtual clock: the streams' speeds and the windows are the
	// model's, whatever the host's load
	clock := timescale.NewVirtual()
	net := memnet.New(clock)
	s, err := New(Options{Profile: p, Clock: clock, Net: net, Seed: 3, Personality: "sglang"})
	if err != nil {
		t.Fatal(err)
	}
	client := net.Client()
	ss := make([]*timedStream, streams)
	var samples []signal.Sample
	prompts := 0
	ctx := context.Background()
	// poll waits on the clock, a modelled millisecond at a time, until cond
	poll := func(cond func() bool) bool {
		for k := 0; !cond(); k++ {
			if k > 600_000 { // 10 modelled minutes
				return false
			}
			if clock.Sleep(ctx, time.Millisecond) != nil {
				return false
			}
		}
		return true
	}
	clock.Run(func() {
		defer s.Close()
		url, err := s.Start("")
		if err != nil {
			t.Error(err)
			return
		}
		g := clock.NewGroup()
		for i := range ss {
			ss[i] = &timedStream{}
			g.Go(func() { ss[i].read(ctx, clock, client, url, words(fmt.Sprintf("s%d-", i), 0, 50), answer) })
		}
		if !poll(func() bool {
			for _, s := range ss {
				if s.chunks.Load() == 0 {
					return false
				}
			}
			return true
		}) {
			t.Error("the streams never all decoded")
			return
		}
		m := signal.SGLang()
		scrapeAt := func(i int) bool {
			sc := &signal.Scraper{Targets: []string{url + "/metrics"}, Mapping: m, Client: client, Sequential: true}
			smp, err := sc.Scrape(ctx, time.Duration(i)*time.Second)
			if err != nil || len(smp.Errors) > 0 {
				t.Errorf("scrape: %v %v", err, smp.Errors)
				return false
			}
			samples = append(samples, smp)
			return true
		}
		if !scrapeAt(0) {
			return
		}
		for ss[0].chunks.Load() < answer-3*perPrompt {
			have := ss[0].chunks.Load()
			if !poll(func() bool { return ss[0].chunks.Load() >= have+perPrompt }) {
				t.Error("streams stopped before the long prompts were sent")
				return
			}
			var long timedStream
			long.read(ctx, clock, client, url, words(fmt.Sprintf("long%d-", prompts), 0, prompt), 1)
			if long.err != nil {
				t.Errorf("long prompt %d: %v", prompts, long.err)
				return
			}
			prompts++
			if prompts%perScrape == 0 && !scrapeAt(prompts/perScrape) {
				return
			}
		}
		_ = g.Wait(ctx)
	})
	if t.Failed() {
		return
	}
	for i, s := range ss {
		if s.err != nil || s.tokens != answer {
			t.Fatalf("stream %d: %v, %d of %d tokens", i, s.err, s.tokens, answer)
		}
	}

	n := len(samples) - 1
	if n < 3 {
		t.Fatalf("only %d windows", n)
	}
	ws := signal.Windows(samples, samples[0].At, samples[n].At, time.Second)
	load := make([]verdict.LoadWindow, len(ws))
	for i := range load {
		load[i] = verdict.LoadWindow{Planned: perScrape, Sent: perScrape}
	}

	// The per-token figure passes: the P90 of the pooled inter-token
	// latency lies in a bucket faster than the bar.
	var hs []stats.Histogram
	for _, w := range ws {
		hs = append(hs, w.Hist[signal.ITL])
	}
	pooled, err := stats.Pool(hs)
	if err != nil {
		t.Fatal(err)
	}
	itl, _, itlHi, _ := pooled.Quantile(0.9)
	if 1/itlHi < bar {
		t.Fatalf("setup: per-token P90 %.4g s (bucket to %.4g s, %.3g tokens/s) does not pass %g tokens/s; the scenario is not the one under test", itl, itlHi, 1/itlHi, bar)
	}

	// Each stream's own speed, as its client saw it, fails.
	var truth []float64
	for _, s := range ss {
		tpot := (s.last - s.first).Seconds() / float64(s.tokens-1)
		truth = append(truth, 1/tpot)
		if 1/tpot >= bar {
			t.Errorf("setup: a stream ran at %.3g tokens/s as its client saw it, not below the %g bar", 1/tpot, bar)
		}
	}

	st := verdict.Judge(verdict.Bar{TTFTP90: 100, InteractivityP90: bar, ErrorRate: 0.5}, ws, load, verdict.DefaultOptions())
	part, _ := st.Part(verdict.PartInteractivity)
	t.Logf("%d long prompts, %d windows; per-token P90 %.4g s (%.3g tokens/s); per-request derived %v tokens/s; streams as clients saw them %.3g tokens/s",
		prompts, len(ws), itl, 1/itl, part.Value, truth)
	if part.Verdict != verdict.Fail {
		t.Errorf("interactivity %s (%v tokens/s from %s), want fail: the per-request figure is under the %g bar", part.Verdict, part.Value, part.Source, bar)
	}
	if part.Source != verdict.DerivedSource || part.Derived == "" {
		t.Errorf("source %q derived %q: SGLang's per-request figure is derived and must say so", part.Source, part.Derived)
	}
}
