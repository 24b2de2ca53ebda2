package sweep

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// vanishing is an engine whose /metrics answers 404 from a moment on.
type vanishing struct {
	*fakeEngine
	from time.Duration
}

func (v *vanishing) Scrape(ctx context.Context, at time.Duration) (signal.Sample, error) {
	if at >= v.from {
		return signal.Sample{}, errors.New("no metrics target answered: http://10.0.0.7:8000/metrics: status 404 Not Found (want 200 from a /metrics endpoint)")
	}
	return v.fakeEngine.Scrape(ctx, at)
}

// When /metrics stops answering mid-step, the sweep stops after a few
// failed scrapes: the steps judged before stand, the step under way reads
// no data (never pooled into an earlier run), no repeat runs, and the error
// names the metrics URL and its answer.
func TestSweepStopsWhenMetricsVanish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 0.5 s per session: 2, 4 and 6 all pass; with repeats a miss
		// would bring step 1 back
		r, _, eng := newRunnerEngine(t, []int{2, 4, 6}, 0.5)
		r.Plan.Repeat = true
		// step 2's judged time starts at 1m25s (warm-up 10 s after step 1
		// ends at 1m15s): the metrics go 30 s into it
		v := &vanishing{fakeEngine: eng, from: 85*time.Second + 30*time.Second}
		r.Source = v
		start := r.Clock.Now()
		res, err := r.Run(context.Background())
		var gone *MetricsGone
		if !errors.As(err, &gone) {
			t.Fatalf("sweep returned %v, want the metrics gone", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "http://10.0.0.7:8000/metrics") || !strings.Contains(msg, "404") {
			t.Errorf("error %q names neither the metrics URL nor its answer", msg)
		}
		var got []string
		for _, s := range res.Steps {
			got = append(got, fmt.Sprintf("%d %s", s.Sessions, s.Judged.Verdict))
		}
		t.Logf("steps %v; stop %q; post-flight %q; took %v", got, res.StopReason, res.PostFlight.Detail, r.Clock.Now()-start)
		if len(res.Steps) != 2 || res.Steps[0].Judged.Verdict != verdict.Pass || res.Steps[1].Judged.Verdict != verdict.NoData {
			t.Fatalf("steps %v, want step 1 pass and step 2 no data, and nothing after", got)
		}
		if res.Steps[1].RepeatOf >= 0 {
			t.Errorf("step 2 is a repeat of step %d", res.Steps[1].RepeatOf+1)
		}
		if res.PostFlight.Idle || !strings.Contains(res.PostFlight.Detail, "could not be checked") {
			t.Errorf("post-flight %+v: want it to say idleness could not be checked", res.PostFlight)
		}
		// it stopped within a step of the metrics going, not after the
		// ladder, repeats and drains
		if took := r.Clock.Now() - start; took > v.from+r.Plan.Step {
			t.Errorf("the sweep took %v after the metrics went at %v", took, v.from)
		}
	})
}

// nanGauges is an engine whose running and waiting gauges read NaN (which
// the mapping drops) once the load stops.
type nanGauges struct {
	*fakeEngine
	fl *fakeLoad
}

func (n *nanGauges) Scrape(ctx context.Context, at time.Duration) (signal.Sample, error) {
	s, err := n.fakeEngine.Scrape(ctx, at)
	n.fl.mu.Lock()
	stopped := n.fl.stopped
	n.fl.mu.Unlock()
	if stopped {
		delete(s.Gauge, signal.Running)
		delete(s.Gauge, signal.Waiting)
	}
	return s, err
}

// Post-flight that cannot check idleness because gauges the run had went
// away (NaN) does not read as a server without them.
func TestPostFlightWithNaNGaugesIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fl, eng := newRunnerEngine(t, []int{2}, 0.5)
		r.Source = &nanGauges{fakeEngine: eng, fl: fl}
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("post-flight %+v", res.PostFlight)
		if res.PostFlight.Idle || strings.Contains(res.PostFlight.Detail, "no running/waiting gauges") || !strings.Contains(res.PostFlight.Detail, "NaN") {
			t.Errorf("post-flight %+v: want a check that could not be made, naming NaN", res.PostFlight)
		}
	})
}

// Metrics that go during a repeat: the repeat reads no data on its own
// (never pooled with the first run's good data) and the stop reason says
// why, not that the steps were repeated.
func TestMetricsVanishDuringARepeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 1.2 s per session: 2 and 4 pass, 6 is too close, 8 fails: the steps
		// either side of the crossing repeat
		r, _, eng := newRunnerEngine(t, []int{2, 4, 6, 8}, 1.2)
		r.Plan.Repeat = true
		var at atomic.Int64 // when the metrics go; 0: not yet known
		r.OnStep = func(s StepResult) error {
			if s.Sessions == 8 && s.RepeatOf < 0 {
				at.Store(int64(time.Duration(s.End*float64(time.Second)) + 2*time.Minute)) // into the first repeat
			}
			return nil
		}
		r.Source = sourceFunc(func(ctx context.Context, t time.Duration) (signal.Sample, error) {
			v := &vanishing{fakeEngine: eng, from: 1 << 62}
			if a := at.Load(); a > 0 {
				v.from = time.Duration(a)
			}
			return v.Scrape(ctx, t)
		})
		res, err := r.Run(context.Background())
		for _, s := range res.Steps {
			t.Logf("step %d: %d sessions, repeat of %d, %s, %.0f-%.0f s", s.Index+1, s.Sessions, s.RepeatOf, s.Judged.Verdict, s.MeasureStart, s.End)
		}
		var gone *MetricsGone
		if !errors.As(err, &gone) {
			t.Fatalf("sweep returned %v, want the metrics gone", err)
		}
		last := res.Steps[len(res.Steps)-1]
		t.Logf("%d steps; last %d sessions, repeat of %d, %s; stop %q", len(res.Steps), last.Sessions, last.RepeatOf, last.Judged.Verdict, res.StopReason)
		if last.RepeatOf < 0 || last.Judged.Verdict != verdict.NoData {
			t.Errorf("last step %+v: want a repeat that reads no data", last.Judged.Verdict)
		}
		if strings.Contains(res.StopReason, "were repeated") {
			t.Errorf("stop reason %q says the steps were repeated", res.StopReason)
		}
	})
}

type sourceFunc func(ctx context.Context, at time.Duration) (signal.Sample, error)

func (f sourceFunc) Scrape(ctx context.Context, at time.Duration) (signal.Sample, error) {
	return f(ctx, at)
}

// Stopped stops the sweep within a scrape of saying so (a write to the run
// directory that failed): the step under way is abandoned, neither judged
// nor kept, and Run returns the error.
func TestStoppedAbandonsTheStepUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, _ := newRunnerEngine(t, []int{2, 4, 6}, 0.5)
		full := errors.New("could not write records.jsonl: no space left on device")
		var stoppedAt time.Duration
		r.Stopped = func() error {
			if now := r.Clock.Now(); now >= 100*time.Second { // in step 2's judged time
				if stoppedAt == 0 {
					stoppedAt = now
				}
				return full
			}
			return nil
		}
		res, err := r.Run(context.Background())
		if !errors.Is(err, full) || !strings.Contains(res.StopReason, "no space left") {
			t.Fatalf("sweep returned %v (stop %q), want the write error", err, res.StopReason)
		}
		if len(res.Steps) != 1 {
			t.Errorf("%d steps kept, want step 1 only: the step under way is abandoned", len(res.Steps))
		}
		if stoppedAt > 100*time.Second+r.Plan.Scrape {
			t.Errorf("the sweep noticed at %v, more than a scrape after the write failed", stoppedAt)
		}
	})
}

// losing is a load that loses one of its shards from a moment on.
type losing struct {
	*fakeLoad
	clock interface{ Now() time.Duration }
	from  time.Duration
}

func (l *losing) Lost() error {
	if l.clock.Now() >= l.from {
		return errors.New("shard 2 was lost at 1m55s (no sync for 10s)")
	}
	return nil
}

// When a shard of the load is lost mid-step, the step under way reads no
// data, even where its parts failed on the load that was left, since it
// did not run its sessions; the steps before stand and the sweep stops
// with the loss as its reason.
func TestSweepStopsWhenAShardIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 2 s per session: 2 passes (4 s), 4 would fail (8 s)
		r, fl, _ := newRunnerEngine(t, []int{2, 4, 6}, 2)
		r.Plan.Repeat = true
		r.Load = &losing{fakeLoad: fl, clock: r.Clock, from: 85*time.Second + 30*time.Second}
		res, err := r.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "shard 2 was lost") {
			t.Fatalf("sweep returned %v, want the lost shard", err)
		}
		var got []string
		for _, s := range res.Steps {
			got = append(got, fmt.Sprintf("%d %s", s.Sessions, s.Judged.Verdict))
		}
		if len(res.Steps) != 2 || res.Steps[0].Judged.Verdict != verdict.Pass || res.Steps[1].Judged.Verdict != verdict.NoData {
			t.Fatalf("steps %v, want 2 sessions pass and 4 no data, nothing after", got)
		}
		for _, p := range res.Steps[1].Judged.Parts {
			if p.Verdict != verdict.NoData {
				t.Errorf("part %s of the step that lost a shard reads %s", p.Name, p.Verdict)
			}
		}
		if !strings.Contains(res.StopReason, "shard 2 was lost") {
			t.Errorf("stop reason %q does not name the lost shard", res.StopReason)
		}
		if !strings.Contains(strings.Join(res.Steps[1].Judged.Warnings, "; "), "shard 2 was lost") {
			t.Errorf("the step's warnings %q do not say why it has no data", res.Steps[1].Judged.Warnings)
		}
	})
}
