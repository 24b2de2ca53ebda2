package verdict

import (
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
)

// TestStallWhateverIsRunning: a window in which requests wait or run and
// none makes progress (nothing completed, no first token, no token at all)
// is no data for latency, whether or not anything is "running". The last
// four of ten windows are rewritten per case; the first six are healthy, so
// their P90s alone would pass.
func TestStallWhateverIsRunning(t *testing.T) {
	const n = 10
	type gauges struct{ running, waiting signal.GaugeStat }
	busy := signal.GaugeStat{Mean: 3, Max: 3, Last: 3, N: 3}
	idle := signal.GaugeStat{N: 3}
	peak := signal.GaugeStat{Mean: 1, Max: 3, Last: 0, N: 3} // waiting only in one scrape
	cases := []struct {
		name              string // what the late windows show
		g                 gauges
		tokens, ok, ttfts float64 // generation tokens, requests_ok, TTFT observations in each late window
		dropGen           bool    // the engine does not export generation_tokens
		itls              float64 // per-token latency observations in each late window
		stall             bool
	}{
		// The KV-full case: running 0, waiting 3, no token, no first token, nothing done.
		{"waiting, nothing running, no progress", gauges{idle, busy}, 0, 0, 0, false, 0, true},
		// The stall the old rule caught: requests running and no token.
		{"running, no token", gauges{busy, idle}, 0, 0, 0, false, 0, true},
		// Both gauges up and no progress at all.
		{"running and waiting, no progress", gauges{busy, busy}, 0, 0, 0, false, 0, true},
		// Waiting at its peak in one scrape only, still nothing moved: a stall.
		{"waiting peak only, no progress", gauges{idle, peak}, 0, 0, 0, false, 0, true},
		// No generation_tokens counter, yet waiting and no TTFT or completion: still a stall.
		{"waiting, no token counter, no progress", gauges{idle, busy}, 0, 0, 0, true, 0, true},
		// Requests waiting while others get their first token: progress, not a stall.
		{"waiting, first tokens come", gauges{idle, busy}, 0, 0, 5, false, 0, false},
		// Requests waiting while others complete (no token counter exported): progress.
		{"waiting, requests complete", gauges{idle, busy}, 0, 4, 0, true, 0, false},
		// Requests running and tokens flowing while others wait: a busy engine, not a stall.
		{"running with tokens, waiting", gauges{busy, busy}, 500, 0, 0, false, 0, false},
		// llm-d-inference-sim counts generation tokens when a request ends
		// and observes TTFT at the first token, so a window in which long
		// answers decode, none starts and none ends shows no token and no
		// first token; its per-token latencies are observed as the tokens go
		// out: progress, not a stall (it read as one, and a healthy step
		// with long answers read no data).
		{"running, tokens counted at the end, per-token latency observed", gauges{busy, idle}, 0, 0, 0, false, 40, false},
		// Nothing waiting or running and nothing done: an idle window, not a stall.
		{"idle", gauges{idle, idle}, 0, 0, 0, false, 0, false},
	}
	for _, c := range cases {
		ws := spec{ttft: fastTTFT, tpot: fastTPOT}.windows(n)
		for i := range ws {
			ws[i].Gauge = map[string]signal.GaugeStat{signal.Running: busy, signal.Waiting: idle}
			ws[i].Counter[signal.GenerationTokens] = 500
			ws[i].Counter[signal.RequestsOK] = 10
		}
		for i := 6; i < n; i++ {
			ws[i].Gauge = map[string]signal.GaugeStat{signal.Running: c.g.running, signal.Waiting: c.g.waiting}
			ws[i].Counter[signal.GenerationTokens] = c.tokens
			ws[i].Counter[signal.RequestsOK] = c.ok
			if c.dropGen {
				delete(ws[i].Counter, signal.GenerationTokens)
			}
			ws[i].Hist[signal.TTFT] = hist(ttftBounds, []float64{0, c.ttfts})
			ws[i].Hist[signal.TPOT] = hist(tpotBounds, []float64{0, 0, c.ok})
			ws[i].Hist[signal.E2E] = hist(ttftBounds, []float64{0, 0, c.ok})
			if c.itls > 0 {
				ws[i].Hist[signal.ITL] = hist(tpotBounds, []float64{0, c.itls})
			}
		}
		st := Judge(bar, ws, load(n, 100, 100), DefaultOptions())
		warned := strings.Contains(strings.Join(st.Warnings, " "), "a stall")
		ttft, _ := st.Part(PartTTFT)
		inter, _ := st.Part(PartInteractivity)
		stalled := ttft.Verdict == NoData && inter.Verdict == NoData
		if stalled != c.stall || warned != c.stall {
			t.Errorf("%s: ttft %s, interactivity %s, stall warning %v; want stall %v (warnings %q)", c.name, ttft.Verdict, inter.Verdict, warned, c.stall, st.Warnings)
		}
	}
}

// TestStallOnlyWithAProgressSignal: a window that exports no progress signal
// at all (no token counter, no completions, no TTFT or E2E histogram) cannot
// tell a stall from quiet; the missing histograms already make latency no
// data, and the stall rule does not claim what it cannot see.
func TestStallOnlyWithAProgressSignal(t *testing.T) {
	w := signal.Window{
		Gauge:   map[string]signal.GaugeStat{signal.Waiting: {Mean: 3, Max: 3, Last: 3, N: 3}},
		Counter: map[string]float64{},
		Hist:    map[string]stats.Histogram{},
	}
	if got := stalledWindows([]signal.Window{w}); got != 0 {
		t.Errorf("a window without progress signals counted as %d stalls, want 0", got)
	}
}
