package sweep

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// sparseEngine is a Source whose every session finishes one turn per
// scrape, each with the given TTFT and 0.03 s per output token, and no
// errors: a step of 60 s at 2 sessions holds 24 turns, too few to prove
// errors under 2%.
type sparseEngine struct {
	mu         sync.Mutex
	load       *fakeLoad
	book       *Book
	clock      *timescale.Clock
	ttftS      float64
	ttft, tpot stats.Histogram
	ok         float64
}

func (e *sparseEngine) Scrape(ctx context.Context, at time.Duration) (signal.Sample, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ttft.Upper == nil {
		e.ttft = stats.Histogram{Upper: ttftBounds, Cumulative: make([]float64, len(ttftBounds))}
		e.tpot = stats.Histogram{Upper: tpotBounds, Cumulative: make([]float64, len(tpotBounds))}
	}
	n := float64(e.load.sessions.Load())
	if n > 0 {
		observe(&e.ttft, e.ttftS, n)
		observe(&e.tpot, 0.03, n)
		e.ok += n
		if t := e.load.tag.Load(); t != nil {
			for range int(n) {
				send := e.clock.Now().Seconds() - 0.01
				e.book.Add(load.Record{V: load.RecordVersion, Step: t.Step, Phase: t.Phase, Send: send, FirstToken: send + 0.005, PlannedPromptTokens: 10, ServedPromptTokens: 10})
			}
		}
	}
	s := signal.NewSample(at)
	s.Hist[signal.TTFT] = e.ttft.Clone()
	s.Hist[signal.TPOT] = e.tpot.Clone()
	for _, c := range []string{signal.HTTP4xx, signal.HTTP5xx, signal.RequestsAborted} {
		s.Counter[c] = 0
	}
	s.Counter[signal.RequestsOK] = e.ok
	s.Gauge[signal.Running] = n
	s.Gauge[signal.Waiting] = 0
	return s, nil
}

func sparseRunner(t *testing.T, sessions int, ttftS float64, maxStep, budget time.Duration) *Runner {
	t.Helper()
	clock, err := timescale.New(1000)
	if err != nil {
		t.Fatal(err)
	}
	fl := &fakeLoad{}
	book := NewBook(nil)
	opts := verdict.DefaultOptions()
	opts.Resamples = 200
	return &Runner{
		Plan: Plan{Ladder: []int{sessions}, Warmup: 10 * time.Second, Step: 60 * time.Second, MaxStep: maxStep, Budget: budget,
			Window: 10 * time.Second, Scrape: 5 * time.Second, Drain: 30 * time.Second,
			Bar: verdict.Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02}, Options: opts},
		Clock: clock, Load: fl, Source: &sparseEngine{load: fl, book: book, clock: clock, ttftS: ttftS}, Book: book,
	}
}

// TestStepRunsUntilDecided: a step with 0 errors in too few turns goes on
// past its 60 s minimum, one look at a time, until its errors' interval
// clears the 2% bar (0 in about 190 turns), and passes; it stops there,
// well before its 600 s limit. A step whose part cannot be decided by its
// limit (a P90 TTFT in the bucket that holds the bar), or whose GPU budget
// is spent, keeps its 60 s. Before, every such step read too close.
func TestStepRunsUntilDecided(t *testing.T) {
	cases := []struct {
		name     string
		sessions int
		ttftS    float64
		maxStep  time.Duration
		budget   time.Duration
		verdict  verdict.Verdict
		extends  bool
	}{
		// errors too close on 24 turns; 240 turns by 600 s would clear 2%
		{"few turns", 2, 1, 600 * time.Second, 0, verdict.Pass, true},
		// 3 sessions: 180 turns at the look at 300 s, 192 at the 320 s
		// limit, which is off the looks' 30 s grid: the last look is the limit
		{"decided at the limit", 3, 1, 320 * time.Second, 0, verdict.Pass, true},
		// P90 TTFT 6 s sits in (5, 7.5], which holds the 5.3 s bar: no
		// length decides it, and errors alone would leave the step too close
		{"bar inside a bucket", 2, 6, 600 * time.Second, 0, verdict.TooClose, false},
		// the GPU window leaves no time beyond the minimum step
		{"budget spent", 2, 1, 600 * time.Second, 80 * time.Second, verdict.TooClose, false},
		// max_step_s = step_s: fixed steps, as before
		{"fixed", 2, 1, 60 * time.Second, 0, verdict.TooClose, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := sparseRunner(t, c.sessions, c.ttftS, c.maxStep, c.budget)
				res, err := r.Run(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Steps) != 1 {
					t.Fatalf("%d steps, want 1", len(res.Steps))
				}
				st := res.Steps[0]
				judged := st.End - st.MeasureStart
				if st.Judged.Verdict != c.verdict {
					t.Errorf("verdict %s after %g s (%d turns), want %s: %+v", st.Judged.Verdict, judged, st.Load.Planned, c.verdict, st.Judged.Parts)
				}
				if extended := judged > 60; extended != c.extends || (st.Extended != "") != c.extends {
					t.Errorf("judged %g s (extended: %q), want extended %v", judged, st.Extended, c.extends)
				}
				if !c.extends {
					return
				}
				// decided at the first look with enough turns: 0 errors in n
				// turns clears 2% at n >= 189, and looks are 30 s apart
				perLook := 30 / 5 * c.sessions
				if judged > c.maxStep.Seconds() || st.Load.Planned < 189 || st.Load.Planned >= 189+perLook {
					t.Errorf("judged %g s with %d turns: want it to stop at the first look past 189 turns", judged, st.Load.Planned)
				}
				if !strings.Contains(st.Extended, fmt.Sprintf("errors too close after 1m0s (%d turns)", 12*c.sessions)) {
					t.Errorf("extension note %q does not say why", st.Extended)
				}
			})
		})
	}
}

// TestProjectedClear: the error part's binomial interval is projected at
// the scaled counts: 0 errors in 149 turns cannot clear 2%, in 190 it can;
// a latency interval shrinks with the square root of the data.
func TestProjectedClear(t *testing.T) {
	errPart := func(lo, hi float64) verdict.Part {
		return verdict.Part{Name: verdict.PartErrors, Verdict: verdict.TooClose, Bar: 0.02, Value: stats.Summary{Center: 0, Lo: lo, Hi: hi}}
	}
	_, hi149 := stats.Wilson(0, 149, 0.95)
	if projectedClear(errPart(0, hi149), 149, 1, 0.95) {
		t.Errorf("0 errors in 149 turns (Wilson upper %.2f%%) projected clear of 2%% with no more turns", 100*hi149)
	}
	if !projectedClear(errPart(0, hi149), 149, 190.0/149, 0.95) {
		t.Error("0 errors in 190 turns not projected clear of 2%")
	}
	ttft := verdict.Part{Name: verdict.PartTTFT, Verdict: verdict.TooClose, Bar: 5.3, Value: stats.Summary{Center: 4.5, Lo: 3.5, Hi: 5.5}}
	if projectedClear(ttft, 100, 1, 0.95) || !projectedClear(ttft, 100, 4, 0.95) {
		t.Error("a TTFT interval 3.5-5.5 around 4.5 should clear 5.3 with 4x the data (3.75-4.95), not without")
	}
	ttft.Value.Hi = math.NaN()
	if projectedClear(ttft, 100, 100, 0.95) {
		t.Error("an interval with no upper end projected clear")
	}
	// well inside the bar but the engine preempted: more time cannot make
	// it pass, so the step does not extend for it
	limit := verdict.Part{Name: verdict.PartTTFT, Verdict: verdict.TooClose, AtLimit: true, Bar: 5.3, Value: stats.Summary{Center: 0.8, Lo: 0.6, Hi: 1.2}}
	if projectedClear(limit, 100, 4, 0.95) {
		t.Error("a part at the engine's limit projected clear")
	}
}

// TestDecidableLooksPastNoData: a provisional judgement that reads no data
// on one part (a latency part short of data at the look) and too close on
// errors that more turns would clear goes on; a failed part or a too-close
// part that cannot clear stops it. Before, any verdict but too close ended
// the step (against llm-d-inference-sim at 24 sessions: TTFT no data at the
// look, errors 0 in 133 turns, not extended, too close).
func TestDecidableLooksPastNoData(t *testing.T) {
	errs := verdict.Part{Name: verdict.PartErrors, Verdict: verdict.TooClose, Bar: 0.02, Value: stats.Summary{Center: 0, Lo: 0, Hi: 0.028}}
	noData := verdict.Part{Name: verdict.PartTTFT, Verdict: verdict.NoData, Bar: 5.3, Value: stats.Summary{Center: 0.47, Lo: 0.25, Hi: 0.5}}
	step := func(v verdict.Verdict, parts ...verdict.Part) verdict.Step {
		return verdict.Step{Verdict: v, Parts: parts}
	}
	if got := decidable(step(verdict.NoData, noData, errs), 133, time.Minute, 3*time.Minute, 0.95); got != "errors" {
		t.Errorf("no data on ttft, errors 0 in 133 turns with 3x to go: %q, want errors", got)
	}
	failed := verdict.Part{Name: verdict.PartInteractivity, Verdict: verdict.Fail, Bar: 10, Value: stats.Summary{Center: 5, Lo: 4, Hi: 6}}
	if got := decidable(step(verdict.Fail, failed, errs), 133, time.Minute, 3*time.Minute, 0.95); got != "" {
		t.Errorf("a failed step extended for %q", got)
	}
	if got := decidable(step(verdict.NoData, noData, errs), 133, time.Minute, time.Minute+10*time.Second, 0.95); got != "" {
		t.Errorf("0 errors in 155 turns cannot clear 2%%, yet extended for %q", got)
	}
	if got := decidable(step(verdict.NoData, noData), 133, time.Minute, 3*time.Minute, 0.95); got != "" {
		t.Errorf("no part too close, yet extended for %q", got)
	}
}
