package sweep

import (
	"context"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/verdict"
)

func TestAKilledStepIsJudgedOnItsDataNotFailedByTheKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 0.5 s per session: every step's latency is within the bar. At 6
		// sessions the queue grows past 4 per session early in the first
		// run's judged time, so the kill switch ends that run after a few
		// windows; the repeat of 6 runs clean for the whole step. The kill
		// protects the fleet (the step stops at once) but decides nothing:
		// the killed run's data and the pooled data are within the bar, so
		// 6 sessions read too close (a run cut short cannot pass), never
		// fail, and the steps that held before it still pass (issue 21.4).
		r, _, eng := newRunnerEngine(t, []int{2, 4, 6}, 0.5)
		r.Plan.Repeat = true
		r.Plan.Kill = Kill{QueuePerSession: 4}
		six, left := false, false // left: the first run of 6 has ended, and the repeat's queue stays empty
		eng.gauges = func(n float64, k int) map[string]float64 {
			six = six || n == 6
			left = left || (six && n != 6)
			if n == 6 && !left && k >= 5 {
				return map[string]float64{signal.Waiting: float64(30 + 10*k)}
			}
			return nil
		}
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var sessions []int
		for _, s := range res.Steps {
			sessions = append(sessions, s.Sessions)
		}
		if len(res.Steps) != 5 || sessions[2] != 6 || sessions[4] != 6 {
			t.Fatalf("steps ran at %v, want 2, 4, 6 (killed), then 4 and 6 again", sessions)
		}
		killed, pooled := res.Steps[2], res.Steps[4]
		if killed.Killed == "" || killed.KilledBy != verdict.PartTTFT {
			t.Fatalf("the first run of 6 sessions: killed %q by %q, want the queue limit on ttft", killed.Killed, killed.KilledBy)
		}
		if killed.Judged.Verdict != verdict.TooClose {
			t.Errorf("the killed run, whose windows are within the bar, reads %s, want too_close", killed.Judged.Verdict)
		}
		if p, _ := killed.Judged.Part(verdict.PartTTFT); p.Verdict != verdict.TooClose || !(p.Value.Hi <= p.Bar) {
			t.Errorf("the killed run's ttft part reads %s on %v (bar %g), want too_close on an interval within the bar", p.Verdict, p.Value, p.Bar)
		}
		if pooled.RepeatOf != killed.Index || pooled.Judged.Verdict != verdict.TooClose {
			t.Errorf("the repeat of 6 (repeat_of %d) reads %s, want too_close: pooled data within the bar must not fail, nor pass on a killed run", pooled.RepeatOf, pooled.Judged.Verdict)
		}
		if !hasWarning(pooled.Judged.Warnings, "kill switch decides no verdict") {
			t.Errorf("the pooled step's warnings %q do not name the kill", pooled.Judged.Warnings)
		}
		if pooled.Windows <= killed.Windows {
			t.Errorf("the pooled step has %d windows, the killed run %d: want both runs'", pooled.Windows, killed.Windows)
		}
		for _, i := range []int{0, 1, 3} {
			if v := res.Steps[i].Judged.Verdict; v != verdict.Pass {
				t.Errorf("step %d (%d sessions) reads %s after a kill at 6: a kill must not turn a good step into a fail", i+1, res.Steps[i].Sessions, v)
			}
		}
		if !strings.Contains(res.StopReason, "kill switch") {
			t.Errorf("stop reason %q does not name the kill switch", res.StopReason)
		}
	})
}

// slowScrapes is scrapes with every request's first token after ttft
// seconds instead of 1 s.
func slowScrapes(gauges []map[string]float64, ttft float64) []signal.Sample {
	out := scrapes(gauges)
	h := stats.Histogram{Upper: ttftBounds, Cumulative: make([]float64, len(ttftBounds))}
	for k := range out {
		if k > 0 {
			observe(&h, ttft, 40)
		}
		out[k].Hist[signal.TTFT] = h.Clone()
	}
	return out
}

func TestAKilledStepFailsOnlyWhenItsIntervalIsBeyondTheBar(t *testing.T) {
	p := judgedPlan()
	healthy := func(n int) []map[string]float64 { return gaugeRun(n, map[string]float64{running: 4, waiting: 0}) }
	why := "P90 TTFT of the last window 37.4s is past 4 times the bar"
	// runs the kill switch ended after 20 s (two windows): one whose windows
	// read 1 s, within the 5.3 s bar, and one whose windows read 9 s, in the
	// bucket (7.5, 10] beyond it; and a full clean 60 s run (six windows)
	short := JudgeStep(p, StepResult{Index: 3, Sessions: 4, RepeatOf: -1, End: 20, Killed: why, KilledBy: verdict.PartTTFT},
		scrapes(healthy(5)), turns(20*time.Second))
	slow := JudgeStep(p, StepResult{Index: 3, Sessions: 4, RepeatOf: -1, End: 20, Killed: why, KilledBy: verdict.PartTTFT},
		slowScrapes(healthy(5), 9), turns(20*time.Second))
	slowOne := JudgeStep(p, StepResult{Index: 3, Sessions: 4, RepeatOf: -1, End: 10, Killed: why, KilledBy: verdict.PartTTFT},
		slowScrapes(healthy(3), 9), turns(10*time.Second))
	slowAll := JudgeStep(p, StepResult{Index: 3, Sessions: 4, RepeatOf: -1, End: 60, Killed: why, KilledBy: verdict.PartTTFT},
		slowScrapes(healthy(13), 9), turns(60*time.Second))
	full := JudgeStep(p, StepResult{Index: 5, Sessions: 4, RepeatOf: 3, End: 60}, scrapes(healthy(13)), turns(60*time.Second))
	shortAgain := short
	shortAgain.Index, shortAgain.RepeatOf = 5, 3
	fullFirst := full
	fullFirst.Index, fullFirst.RepeatOf = 3, -1
	slowAgain := slowAll
	slowAgain.Index, slowAgain.RepeatOf = 5, 3
	alone := []struct {
		name string
		st   StepResult
		want verdict.Verdict
	}{
		{"killed, within the bar", short, verdict.TooClose},
		{"killed, beyond the bar", slow, verdict.Fail},
		// one window beyond the bar: no interval, only its bucket; a trip
		// on one window decides nothing
		{"killed after one window beyond the bar", slowOne, verdict.TooClose},
	}
	if slowOne.Windows != 1 {
		t.Fatalf("the one-window run has %d windows", slowOne.Windows)
	}
	for _, c := range alone {
		if p, _ := c.st.Judged.Part(verdict.PartTTFT); c.st.Judged.Verdict != c.want || p.Verdict != c.want {
			t.Errorf("%s: the run reads %s (ttft %s on %v), want %s", c.name, c.st.Judged.Verdict, p.Verdict, p.Value, c.want)
		}
		if !hasWarning(c.st.Judged.Warnings, "kill switch decides no verdict") {
			t.Errorf("%s: warnings %q do not name the kill", c.name, c.st.Judged.Warnings)
		}
	}
	cases := []struct {
		name        string
		first, then StepResult
		want        verdict.Verdict
		warn        string
	}{
		// the first run was killed on a bad last window, the data pooled are
		// within the bar: too close, not a fail, and no pass on a cut run
		{name: "first run killed, pooled within the bar", first: short, then: full, want: verdict.TooClose, warn: "kill switch decides no verdict"},
		{name: "repeat killed, pooled within the bar", first: fullFirst, then: shortAgain, want: verdict.TooClose, warn: "kill switch decides no verdict"},
		// the repeat was killed and the pooled interval is beyond the bar: a fail
		{name: "repeat killed, pooled beyond the bar", first: slow, then: slowAgain, want: verdict.Fail, warn: "kill switch decides no verdict"},
		// neither was: both runs' windows judge the step (control)
		{name: "no kill", first: fullFirst, then: full, want: verdict.Pass, warn: "together"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Pool(p, c.first, c.then)
			if got.Judged.Verdict != c.want {
				t.Errorf("pooled verdict %s, want %s (parts %+v)", got.Judged.Verdict, c.want, got.Judged.Parts)
			}
			if !hasWarning(got.Judged.Warnings, c.warn) {
				t.Errorf("warnings %q, want one with %q", got.Judged.Warnings, c.warn)
			}
			if got.Windows != c.first.Windows+c.then.Windows {
				t.Errorf("%d windows pooled, want %d + %d", got.Windows, c.first.Windows, c.then.Windows)
			}
		})
	}
}

func hasWarning(ws []string, phrase string) bool {
	for _, w := range ws {
		if strings.Contains(w, phrase) {
			return true
		}
	}
	return false
}

// A run the kill switch cut short measured only the windows before the
// queue ran away: what it did not measure would have read worse. Its
// latency parts' intervals are open on that side (verdict.Part.Bounds), so
// they never claim an upper end on TTFT or a lower end on interactivity
// that the run did not reach; the coverage study found 24 of 40 killed or
// repeated 12-session intervals wholly below a pooled truth of 18.3 s. A
// latency part that the kill did not watch cannot pass either.
func TestACutShortRunsIntervalIsOpenOnTheBadSide(t *testing.T) {
	p := judgedPlan()
	healthy := func(n int) []map[string]float64 { return gaugeRun(n, map[string]float64{running: 4, waiting: 0}) }
	why := "P90 TTFT of the last window 37.4s is past 4 times the bar"
	cut := JudgeStep(p, StepResult{Index: 3, Sessions: 4, RepeatOf: -1, End: 20, Killed: why, KilledBy: verdict.PartTTFT},
		scrapes(healthy(5)), turns(20*time.Second))
	clean := JudgeStep(p, StepResult{Index: 3, Sessions: 4, RepeatOf: -1, End: 60}, scrapes(healthy(13)), turns(60*time.Second))
	for _, name := range []string{verdict.PartTTFT, verdict.PartInteractivity} {
		q, ok := cut.Judged.Part(name)
		if !ok {
			t.Fatalf("the cut-short run has no %s part", name)
		}
		lo, hi := q.Bounds()
		t.Logf("%s: %s, measured [%.3g, %.3g], claimed [%.3g, %.3g]", name, q.Verdict, q.Value.Lo, q.Value.Hi, lo, hi)
		if !q.CutShort {
			t.Errorf("%s: not marked cut short", name)
		}
		if q.Verdict == verdict.Pass {
			t.Errorf("%s passes on a run cut short", name)
		}
		if name == verdict.PartTTFT && !math.IsInf(hi, 1) || name == verdict.PartInteractivity && lo != 0 {
			t.Errorf("%s: claimed interval [%g, %g] is closed on the bad side", name, lo, hi)
		}
		if c, _ := clean.Judged.Part(name); c.CutShort || c.Verdict != verdict.Pass {
			t.Errorf("%s of a run not cut short: cut short %v, %s; want a closed interval that passes", name, c.CutShort, c.Verdict)
		}
	}
}
