package sweep

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// TestNoStepHeldRunsTheLowerStepAgain: TTFT = sessions x 1.8 s puts 3 and 4
// sessions in the bucket (5, 7.5] that straddles the 5.3 s bar (too close)
// and 5 past it (fail). The repeats either side of the crossing (4 and 5)
// leave no step that held; the sweep then runs the highest too-close step
// below them (3) once more, pooled with its first run, where before it
// stopped and the run read "not established" on a first step it had not
// tried to settle. With no room left in the sweep's budget it says so and
// runs nothing.
func TestNoStepHeldRunsTheLowerStepAgain(t *testing.T) {
	ran := func(budget time.Duration) string {
		var got []int
		synctest.Test(t, func(t *testing.T) {
			r, _ := newRunner(t, []int{3, 4, 5}, 1.8)
			r.Plan.Repeat, r.Plan.Budget = true, budget
			res, err := r.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range res.Steps {
				got = append(got, s.Sessions)
				if s.Judged.Verdict == verdict.Pass && s.Sessions > 2 {
					t.Errorf("step %d (%d sessions) passed; the fake engine puts every step from 3 sessions in or past the bar's bucket", s.Index, s.Sessions)
				}
			}
			if budget == 0 && len(res.Steps) > 5 {
				if settle := res.Steps[5]; settle.RepeatOf != res.Steps[0].Index || settle.Windows != 2*res.Steps[0].Windows {
					t.Errorf("the step below: repeat_of %d, %d windows; want step %d and both runs' %d windows", settle.RepeatOf, settle.Windows, res.Steps[0].Index, 2*res.Steps[0].Windows)
				}
			}
			if said := strings.Contains(res.StopReason, "3 sessions, below them"); said != (budget == 0) {
				t.Errorf("budget %v: stop reason %q", budget, res.StopReason)
			}
			ranOut := false
			for _, w := range res.Warnings {
				ranOut = ranOut || strings.Contains(w, "no room left to run 3 sessions again")
			}
			if ranOut != (budget > 0) {
				t.Errorf("budget %v: warnings %q", budget, res.Warnings)
			}
		})
		return fmt.Sprint(got)
	}
	if got := ran(0); got != "[3 4 5 4 5 3 2]" {
		t.Errorf("steps ran at %s, want 3 4 5, the repeats 4 5, 3 again, then 2 below it (3.6 s: it holds)", got)
	}
	if got := ran(time.Second); got != "[3 4 5 4 5]" {
		t.Errorf("with no room in the budget: steps ran at %s, want 3 4 5 4 5", got)
	}
}

// TestUnprimedRepeatDoesNotEndTheRun: heavy-only sweeps whose repeat of the
// step that missed (12 sessions, ramped back from a drained engine) still
// had lanes priming when its judged time began stopped there with a rig
// error, "warm-up too short", four judged steps thrown away and the run
// "not established". The climb had primed that step; the repeat is left
// out with a warning, its first run's verdict stands, and the sweep goes on.
func TestUnprimedRepeatDoesNotEndTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fl := newRunner(t, []int{3, 4, 5}, 1.8)
		r.Plan.Repeat = true
		r.OnStepStart = func(i, n int) {
			fl.mu.Lock()
			defer fl.mu.Unlock()
			fl.priming = load.Priming{}
			if i == 4 { // the repeat of 5 sessions
				fl.priming = load.Priming{Started: 5, Pending: 2, Longest: 40 * time.Second}
			}
		}
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatalf("run: %v; want the unprimed repeat left out, not the run", err)
		}
		var got []int
		for _, s := range res.Steps {
			got = append(got, s.Sessions)
		}
		if fmt.Sprint(got) != "[3 4 5 4 3 2]" {
			t.Errorf("steps %v, want 3 4 5, the repeat of 4, 3 again (the repeat of 5 left out), then 2 below them", got)
		}
		left := false
		for _, w := range res.Warnings {
			left = left || strings.Contains(w, "the repeat of 5 sessions was not judged")
		}
		if !left || !strings.Contains(res.StopReason, "did not prime") {
			t.Errorf("stop reason %q, warnings %q: want the left-out repeat named", res.StopReason, res.Warnings)
		}
	})
}

// TestFirstStepMissedStepsDown: TTFT = sessions x 0.8 s puts a ladder's
// first step, 10 sessions, past the 5.3 s bar (8 s: fail). Before, the
// sweep stopped there and read "not established" (the reference recipe 0's
// first step sits on its crossing, and half its study runs read so). Now
// it runs 7 sessions (three quarters of 10; 5.6 s, in the bucket that
// straddles the bar: too close), then 5 (half the first step; 4 s: pass),
// and capacity is established between them. With no room left in the GPU
// window it says so and runs nothing; a first step that held, or a ladder
// of one step, never steps down.
func TestFirstStepMissedStepsDown(t *testing.T) {
	ran := func(ladder []int, perSession float64, budget time.Duration) (string, Result) {
		return sweptSessions(t, ladder, perSession, func(p *Plan) { p.Budget = budget })
	}
	got, res := ran([]int{10, 15, 20}, 0.8, 0)
	if got != "[10 7 5]" {
		t.Fatalf("steps ran at %s, want 10, then 7 and 5 below it", got)
	}
	if c := res.Capacity; c.NotEstablished || c.Bracket != [2]int{5, 7} || c.Lo < 5 || c.Hi > 10 {
		t.Errorf("capacity %s, bracket %v: want it established from 5 (held), below the 10 that failed", c, c.Bracket)
	}
	if !strings.Contains(res.StopReason, "7 and 5 sessions ran below the lowest step") {
		t.Errorf("stop reason %q: want the steps below named", res.StopReason)
	}
	// 10 s of budget: no room for a step of 10 s warm-up and 60 s judged
	got, res = ran([]int{10, 15, 20}, 0.8, 100*time.Second)
	if got != "[10]" {
		t.Errorf("with no room in the window: steps ran at %s, want 10 alone", got)
	}
	if !hasWarning(res.Warnings, "no room left to run 7 sessions, below the lowest step") {
		t.Errorf("warnings %q: want the lack of room said", res.Warnings)
	}
	if got, _ := ran([]int{4, 8}, 0.8, 0); got != "[4 8]" {
		t.Errorf("a first step that held: steps ran at %s, want 4 8 (8 holds too: 6.4 s is too close, nothing below)", got)
	}
	if got, _ := ran([]int{10}, 0.8, 0); got != "[10]" {
		t.Errorf("a ladder of one step: steps ran at %s, want 10 alone", got)
	}
}

// TestAdaptiveKeepsRoomForAStepBelow: an adaptive sweep whose first step
// reads too close (10 sessions, TTFT 6 s in the bucket (5, 7.5] that holds
// the 5.3 s bar) climbs and bisects above it, 20, 15, 12, 13, none of
// which holds. With a window of 400 s, bisecting to the end left no room for
// 7 sessions below, which hold, and the sweep established nothing; now it
// stops bisecting while a step below still fits, and establishes capacity.
func TestAdaptiveKeepsRoomForAStepBelow(t *testing.T) {
	ran := func(budget time.Duration) (string, Result) {
		return sweptSessions(t, []int{10, 20}, 0.6, func(p *Plan) { p.Adaptive, p.Resolution, p.Budget = true, 1, budget })
	}
	got, res := ran(0)
	if got != "[10 20 15 12 13 7]" {
		t.Fatalf("without a window: steps at %s, want the bisection to its end and then 7 below", got)
	}
	got, res = ran(400 * time.Second)
	t.Logf("in a 400 s window: steps at %s, capacity %s", got, res.Capacity)
	if c := res.Capacity; c.NotEstablished || c.Bracket[0] != 7 {
		t.Errorf("in a 400 s window: steps at %s, capacity %s (bracket %v): want it established from 7, which holds", got, c, c.Bracket)
	}
	if !strings.HasSuffix(got, " 7]") {
		t.Errorf("in a 400 s window: steps at %s, want the last at 7", got)
	}
	if !hasWarning(res.Warnings, "so that the GPU window keeps room for a step below the lowest") {
		t.Errorf("warnings %q: want the step left out said", res.Warnings)
	}
}

// sweptSessions runs a sweep on the fake engine (TTFT = sessions x
// perSession s) with its plan edited, and returns the sessions of the steps
// it ran, in order, with the result.
func sweptSessions(t *testing.T, ladder []int, perSession float64, edit func(*Plan)) (string, Result) {
	t.Helper()
	var got []int
	var res Result
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRunner(t, ladder, perSession)
		edit(&r.Plan)
		var err error
		if res, err = r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Steps {
			got = append(got, s.Sessions)
		}
	})
	return fmt.Sprint(got), res
}
