package sweep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// fakeLoad records what the sweep asked of it and writes one successful
// record per scrape tick per session into the book, like lanes would.
type fakeLoad struct {
	mu       sync.Mutex
	sessions atomic.Int64
	tag      atomic.Pointer[load.Tag]
	stopped  bool
	priming  load.Priming
	calls    []int // every SetSessions, in order
}

func (f *fakeLoad) SetSessions(n int) {
	f.mu.Lock()
	f.calls = append(f.calls, n)
	f.mu.Unlock()
	f.sessions.Store(int64(n))
}
func (f *fakeLoad) SetTag(t load.Tag) { f.tag.Store(&t) }
func (f *fakeLoad) InFlight() int     { return int(f.sessions.Load()) }
func (f *fakeLoad) Stop(time.Duration) {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.sessions.Store(0)
}
func (f *fakeLoad) Priming() load.Priming { f.mu.Lock(); defer f.mu.Unlock(); return f.priming }

// fakeEngine is a Source whose TTFT histogram grows by ten requests per
// session per scrape, each taking sessions x perSession seconds; running and
// waiting follow the load.
type fakeEngine struct {
	mu         sync.Mutex
	load       *fakeLoad
	book       *Book
	clock      *timescale.Clock
	perSession float64
	ttft, tpot stats.Histogram
	ok, total  float64
	// gauges, if set, overrides or adds gauges of a scrape at n sessions; k
	// counts the scrapes at n sessions before this one.
	gauges func(n float64, k int) map[string]float64
	seen   map[float64]int
	// hang, if set, sends one turn (lane 99) in the first judged scrape of
	// each step that never gets an outcome, as a request stuck waiting does.
	hang  bool
	hung  map[int]bool
	stuck []load.Record
}

var (
	ttftBounds = []float64{0.5, 1, 2, 2.5, 5, 7.5, 10, 20, math.Inf(1)}
	tpotBounds = []float64{0.025, 0.05, 0.075, 0.1, 0.15, 0.2, math.Inf(1)}
)

func observe(h *stats.Histogram, v, n float64) {
	for i, ub := range h.Upper {
		if v <= ub {
			h.Cumulative[i] += n
		}
	}
	h.Count += n
	h.Sum += v * n
}

func (e *fakeEngine) Scrape(ctx context.Context, at time.Duration) (signal.Sample, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ttft.Upper == nil {
		e.ttft = stats.Histogram{Upper: ttftBounds, Cumulative: make([]float64, len(ttftBounds))}
		e.tpot = stats.Histogram{Upper: tpotBounds, Cumulative: make([]float64, len(tpotBounds))}
	}
	n := float64(e.load.sessions.Load())
	if n > 0 {
		observe(&e.ttft, n*e.perSession, 10*n)
		observe(&e.tpot, 0.03, 10*n)
		e.ok += 10 * n
		if t := e.load.tag.Load(); t != nil {
			for i := 0; i < int(10*n); i++ {
				send := e.clock.Now().Seconds() - 0.01
				e.book.Add(load.Record{V: load.RecordVersion, Step: t.Step, Phase: t.Phase, Send: send, FirstToken: send + 0.005, PlannedPromptTokens: 10, ServedPromptTokens: 10})
			}
			if e.hang && t.Phase == load.PhaseMeasure && !e.hung[t.Step] {
				if e.hung == nil {
					e.hung = map[int]bool{}
				}
				e.hung[t.Step] = true
				rec := load.Record{V: load.RecordVersion, Step: t.Step, Phase: t.Phase, Lane: 99, Send: e.clock.Now().Seconds(), PlannedPromptTokens: 10}
				e.book.Sent(rec)
				e.stuck = append(e.stuck, rec)
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
	if e.gauges != nil {
		if e.seen == nil {
			e.seen = map[float64]int{}
		}
		for name, v := range e.gauges(n, e.seen[n]) {
			s.Gauge[name] = v
		}
		e.seen[n]++
	}
	return s, nil
}

func newRunner(t *testing.T, ladder []int, perSession float64) (*Runner, *fakeLoad) {
	t.Helper()
	r, fl, _ := newRunnerEngine(t, ladder, perSession)
	return r, fl
}

// newRunnerEngine is newRunner that also returns the fake engine, so a test
// can shape its gauges.
func newRunnerEngine(t *testing.T, ladder []int, perSession float64) (*Runner, *fakeLoad, *fakeEngine) {
	t.Helper()
	clock, err := timescale.New(1000)
	if err != nil {
		t.Fatal(err)
	}
	fl := &fakeLoad{}
	book := NewBook(nil)
	eng := &fakeEngine{load: fl, book: book, clock: clock, perSession: perSession}
	opts := verdict.DefaultOptions()
	opts.Resamples = 200
	return &Runner{
		Plan: Plan{Ladder: ladder, Warmup: 10 * time.Second, Step: 60 * time.Second, Window: 10 * time.Second,
			Scrape: 5 * time.Second, Drain: 30 * time.Second,
			Bar: verdict.Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02}, Options: opts},
		Clock: clock, Load: fl, Source: eng, Book: book,
	}, fl, eng
}

func TestRunnerStopsAtTheFirstFailingStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// TTFT = sessions x 1.2 s: 2 -> 2.4 s and 4 -> 4.8 s pass (their buckets end
		// at 2.5 and 5, under 5.3); 6 -> 7.2 s sits in (5, 7.5], which straddles the
		// bar: too close; 8 -> 9.6 s fails; 10 never runs.
		r, fl := newRunner(t, []int{2, 4, 6, 8, 10}, 1.2)
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := []verdict.Verdict{}
		for _, s := range res.Steps {
			got = append(got, s.Judged.Verdict)
		}
		want := []verdict.Verdict{verdict.Pass, verdict.Pass, verdict.TooClose, verdict.Fail}
		if len(got) != len(want) {
			t.Fatalf("verdicts %v, want %v (the sweep must stop at the fail)", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("step %d: %s, want %s", i, got[i], want[i])
			}
		}
		if res.Capacity.LimitedBy != "ttft" || res.Capacity.Sessions < 4 || res.Capacity.Sessions > 6 {
			t.Errorf("capacity %+v, want between 4 and 6 limited by ttft", res.Capacity)
		}
		if !fl.stopped || !res.PostFlight.Idle || !res.PostFlight.Verified {
			t.Errorf("post-flight: load stopped %v, %+v", fl.stopped, res.PostFlight)
		}
		for _, s := range res.Steps {
			if s.Windows != 6 || s.Load.Planned == 0 {
				t.Errorf("step %d: %d windows and %d planned turns, want 6 windows of the 60 s step and turns", s.Index, s.Windows, s.Load.Planned)
			}
			if math.Mod(s.MeasureStart, 5) != 0 {
				t.Errorf("step %d judged from %gs, off the 5 s scrape grid", s.Index, s.MeasureStart)
			}
		}
	})
}

func TestRunnerFailsLoudlyWhenWarmupWouldEatTheStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fl := newRunner(t, []int{2, 4}, 0.1)
		fl.priming = load.Priming{Started: 2, Pending: 1, Longest: 40 * time.Second}
		res, err := r.Run(context.Background())
		if !errors.Is(err, ErrWarmupTooShort) {
			t.Fatalf("err = %v, want ErrWarmupTooShort", err)
		}
		if len(res.Steps) != 0 {
			t.Errorf("%d steps judged on a step the warm-up ate", len(res.Steps))
		}
		if !fl.stopped {
			t.Error("the load was not stopped after the warm-up failure")
		}
	})
}

func TestRunnerRepeatsTheStepsEitherSideOfTheCrossing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRunner(t, []int{2, 4, 6, 8, 10}, 1.2)
		r.Plan.Repeat = true
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// 2, 4, 6 (too close), 8 (fail), then 6 and 8 again
		var sessions []int
		for _, s := range res.Steps {
			sessions = append(sessions, s.Sessions)
		}
		want := []int{2, 4, 6, 8, 6, 8}
		if len(sessions) != len(want) {
			t.Fatalf("steps ran at %v, want %v", sessions, want)
		}
		for k := range want {
			if sessions[k] != want[k] {
				t.Fatalf("steps ran at %v, want %v", sessions, want)
			}
		}
		rep := res.Steps[4]
		if rep.RepeatOf != res.Steps[2].Index || rep.Windows != 2*res.Steps[2].Windows {
			t.Errorf("the repeat of 6 sessions: repeat_of %d, %d windows; want step %d and both runs' %d windows", rep.RepeatOf, rep.Windows, res.Steps[2].Index, 2*res.Steps[2].Windows)
		}
	})
}

func TestKillSwitchEndsAHopelessStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 4 sessions at 5 s each: a 20 s P90 TTFT, past 3 x 5.3 s
		r, _ := newRunner(t, []int{4, 8}, 5)
		r.Plan.Kill = Kill{TTFTFactor: 3}
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// the kill ends the climb; as no step held, the sweep then looks
		// below the first step (3, then 2 sessions: 15 s, killed again, and
		// 10 s, a fail)
		var below []int
		for _, s := range res.Steps[1:] {
			below = append(below, s.Sessions)
		}
		if len(res.Steps) == 0 || res.Steps[0].Killed == "" || fmt.Sprint(below) != "[3 2]" {
			t.Fatalf("steps at %d sessions (killed %q), then %v: want one step ended by the kill switch, then 3 and 2 below it", res.Steps[0].Sessions, res.Steps[0].Killed, below)
		}
		if got := res.Steps[0].End - res.Steps[0].MeasureStart; got >= r.Plan.Step.Seconds() {
			t.Errorf("the killed step ran its full %gs", got)
		}
		if res.Steps[0].Judged.Verdict == verdict.Pass {
			t.Error("a killed step passed")
		}
	})
}

func TestAdaptiveBracketsTheCrossing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// TTFT = sessions x 1.2 s: 2, 4 pass; 6 (7.2 s) is too close; 7 and 8 fail.
		r, l := newRunner(t, []int{2, 16}, 1.2)
		r.Plan.Adaptive, r.Plan.Resolution = true, 1
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// bisecting down from the step that missed (8) to 6, the lanes stop
		// and the engine drains first: 6 must not start on 8's backlog
		l.mu.Lock()
		calls := fmt.Sprint(l.calls)
		l.mu.Unlock()
		if !strings.Contains(calls, "8 0 2 4 6") {
			t.Errorf("SetSessions calls %s: want 8, then 0 (drain), then 6 brought back in batches of 2", calls)
		}
		var got []int
		for _, s := range res.Steps {
			got = append(got, s.Sessions)
		}
		want := []int{2, 4, 8, 6, 7} // double until a miss, then bisect to one session
		if len(got) != len(want) {
			t.Fatalf("adaptive steps %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("adaptive steps %v, want %v", got, want)
			}
		}
		// the centre crosses 5.3 s between 4 (4.8 s) and 6 (7.2 s); 6 still read
		// too close (its bucket straddles the bar), so the bisection went on to 7
		if res.Capacity.Sessions < 4 || res.Capacity.Hi > 7 || !strings.Contains(res.StopReason, "between 6 (held) and 7 (missed)") {
			t.Errorf("capacity %s, stop %q: want a capacity in 4-7 bracketed by 6 and 7", res.Capacity, res.StopReason)
		}
	})
}
