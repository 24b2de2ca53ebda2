package canary

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/verdict"
)

var (
	ttftBounds = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, math.Inf(1)}
	tpotBounds = []float64{0.01, 0.025, 0.05, 0.1, math.Inf(1)}
)

// engine is a side's fake engine: its /metrics as a scraper reads them,
// counting every request the router finished on the side as served in
// ttft seconds to the first token and tpot seconds per token after it.
type engine struct {
	router *Router
	side   int
	mu     sync.Mutex
	ttft   float64
	tpot   float64
	seen   int
	hist   [2][]float64 // cumulative counts of TTFT and TPOT
}

func newEngine(rt *Router, side int, ttft, tpot float64) *engine {
	return &engine{router: rt, side: side, ttft: ttft, tpot: tpot, hist: [2][]float64{make([]float64, len(ttftBounds)), make([]float64, len(tpotBounds))}}
}

func (e *engine) set(ttft float64) {
	e.mu.Lock()
	e.ttft = ttft
	e.mu.Unlock()
}

func observe(cum, bounds []float64, v float64, n int) {
	for i, b := range bounds {
		if v <= b {
			cum[i] += float64(n)
		}
	}
}

func (e *engine) Scrape(_ context.Context, at time.Duration) (signal.Sample, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	done := e.router.Snapshot().Counts[e.side].Finished
	observe(e.hist[0], ttftBounds, e.ttft, done-e.seen)
	observe(e.hist[1], tpotBounds, e.tpot, done-e.seen)
	e.seen = done
	s := signal.NewSample(at)
	for _, name := range []string{signal.RequestsOK, signal.HTTP2xx} {
		s.Counter[name] = float64(done)
	}
	for _, name := range []string{signal.HTTP4xx, signal.HTTP5xx, signal.RequestsAborted} {
		s.Counter[name] = 0
	}
	s.Hist[signal.TTFT] = stats.Histogram{Upper: ttftBounds, Cumulative: append([]float64(nil), e.hist[0]...), Count: float64(done)}
	s.Hist[signal.TPOT] = stats.Histogram{Upper: tpotBounds, Cumulative: append([]float64(nil), e.hist[1]...), Count: float64(done)}
	return s, nil
}

type answer struct{}

func (answer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// runCanary runs a canary on a virtual clock against two fake engines,
// with a new session every quarter second; worsen, when set, runs on every
// tick.
func runCanary(t *testing.T, plan Plan, traffic bool, worsen func(Tick, *engine)) Result {
	t.Helper()
	clock := timescale.NewVirtual()
	var res Result
	var err error
	clock.Run(func() {
		ctx, cancel := clock.WithCancel(context.Background())
		defer cancel()
		rt, e := NewRouter(RouterOptions{Clock: clock, Baseline: answer{}, Candidate: answer{}})
		if e != nil {
			t.Fatal(e)
		}
		base, cand := newEngine(rt, Baseline, 0.3, 0.02), newEngine(rt, Candidate, 0.3, 0.02)
		if traffic {
			clock.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					body := `{"messages":[{"role":"user","content":"session ` + strconv.Itoa(i) + `"}]}`
					rt.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
					_ = clock.Sleep(ctx, 250*time.Millisecond)
				}
			})
		}
		c := &Controller{Plan: plan, Clock: clock, Router: rt, Scrapers: [2]Scraper{base, cand}}
		if worsen != nil {
			c.OnTick = func(tk Tick) { worsen(tk, cand) }
		}
		res, err = c.Run(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range res.Ticks {
		t.Logf("t=%4.0fs share %3.0f%%: baseline %s, candidate %s, no worse %s: %s: %s", tk.At, 100*tk.Share, tk.Baseline.Verdict, tk.Candidate.Verdict, tk.NoWorse.Verdict, tk.Decision, tk.Why)
	}
	return res
}

func testPlan() Plan {
	return Plan{
		Shares: []float64{0.1, 0.5}, Hold: 2 * time.Minute, MaxHold: 5 * time.Minute,
		Window: 30 * time.Second, Scrape: 5 * time.Second,
		Bar:     verdict.Bar{TTFTP90: 2, InteractivityP90: 10, ErrorRate: 0.2},
		Options: verdict.Options{Resamples: 300, Seed: 1, Confidence: 0.95},
		Kill:    Kill{TTFTFactor: 4, ErrorRate: 0.5},
		NoWorse: NoWorse{Tolerance: 0.1, ErrorPoints: 0.05},
	}
}

// TestControllerRaisesToReady: a candidate as good as the baseline is
// raised share by share and is ready after holding at the last.
func TestControllerRaisesToReady(t *testing.T) {
	res := runCanary(t, testPlan(), true, nil)
	if res.Outcome != Ready || len(res.Steps) != 2 || res.Steps[0].Outcome != "raise" || res.Steps[1].Outcome != Ready {
		t.Fatalf("outcome %s (%s), steps %+v: want raised once, then ready", res.Outcome, res.Reason, res.Steps)
	}
	if res.Final.Share != 0.5 {
		t.Fatalf("share %g at the end, want the last share kept", res.Final.Share)
	}
}

// TestControllerRollsBackOnClearMiss: a candidate whose first tokens slow
// past the kill switch's limit goes back to 0 at the next window.
func TestControllerRollsBackOnClearMiss(t *testing.T) {
	worsened := -1.0
	plan := testPlan()
	res := runCanary(t, plan, true, func(tk Tick, cand *engine) {
		if tk.Step == 1 && worsened < 0 {
			cand.set(15)
			worsened = tk.At
		}
	})
	if res.Outcome != Failed || res.Final.Share != 0 {
		t.Fatalf("outcome %s (%s), share %g: want failed and share 0", res.Outcome, res.Reason, res.Final.Share)
	}
	last := res.Ticks[len(res.Ticks)-1]
	// the rule is read at every scrape, as the sweep's kill switch is: not
	// at the window's end
	if last.Miss == "" || last.At-worsened > 2*plan.Scrape.Seconds() {
		t.Fatalf("rolled back at %.0fs (worsened at %.0fs), miss %q: want the kill switch's rule within two scrapes", last.At, worsened, last.Miss)
	}
}

// TestControllerHoldsWithoutData: no traffic, no data: the share holds
// until max hold, and the canary ends undecided with the share kept.
func TestControllerHoldsWithoutData(t *testing.T) {
	res := runCanary(t, testPlan(), false, nil)
	if res.Outcome != Undecided || res.Final.Share != 0.1 {
		t.Fatalf("outcome %s (%s), share %g: want undecided at the first share", res.Outcome, res.Reason, res.Final.Share)
	}
}

// TestCompareNoWorse: the same latency on both sides is no worse; twice the
// baseline's first-token time is worse with confidence.
func TestCompareNoWorse(t *testing.T) {
	mk := func(ttft float64) judged {
		var j judged
		for i := range 8 {
			h := stats.Histogram{Upper: ttftBounds, Cumulative: make([]float64, len(ttftBounds))}
			observe(h.Cumulative, ttftBounds, ttft*(1+0.05*float64(i%3)), 40)
			p := stats.Histogram{Upper: tpotBounds, Cumulative: make([]float64, len(tpotBounds))}
			observe(p.Cumulative, tpotBounds, 0.02, 40)
			w := signal.Window{Start: time.Duration(i) * 30 * time.Second, End: time.Duration(i+1) * 30 * time.Second,
				Hist: map[string]stats.Histogram{signal.TTFT: h, signal.TPOT: p}, Counter: map[string]float64{signal.HTTP4xx: 0, signal.HTTP5xx: 0}}
			j.windows = append(j.windows, w)
			j.loads = append(j.loads, verdict.LoadWindow{Planned: 40, Sent: 40})
		}
		return j
	}
	o := verdict.Options{Resamples: 300, Seed: 1, Confidence: 0.95}
	nw := NoWorse{Tolerance: 0.1, ErrorPoints: 0.01}
	if c := compare(nw, o, mk(0.6), mk(0.6)); c.Verdict != verdict.Pass {
		t.Errorf("same latency: %s %+v, want pass", c.Verdict, c.Parts)
	}
	c := compare(nw, o, mk(0.6), mk(1.5))
	if p := c.Parts[0]; c.Verdict != verdict.Fail || p.Verdict != verdict.Fail || !(p.Value.Lo > 1.1) {
		t.Errorf("candidate 2.5 times slower to the first token: %s, ttft %s %s, want fail", c.Verdict, p.Verdict, p.Value)
	}
}
