package sweep

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/verdict"
)

func TestAStepTheKillSwitchEndedIsAFailEvenWhenPoolingWouldPassIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 0.5 s per session: every step's latency passes the bar. At 6 sessions
		// the queue grows past 4 per session early in the first run's judged
		// time, so the kill switch ends that run after a few windows; the repeat
		// of 6 runs clean for the whole step. The case: pooling the
		// killed run's few windows with the repeat's turned the step into a pass
		// and capacity into ">= 6, not reached".
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
		// the killed run is a fail for that run, on the part its limit watches
		if killed.Judged.Verdict != verdict.Fail {
			t.Errorf("the killed run reads %s, want fail", killed.Judged.Verdict)
		}
		if p, _ := killed.Judged.Part(verdict.PartTTFT); p.Verdict != verdict.Fail {
			t.Errorf("the killed run's ttft part reads %s, want fail", p.Verdict)
		}
		// pooled with a clean repeat it stays a fail, with a warning naming
		// the kill; the windows are both runs'
		if pooled.RepeatOf != killed.Index || pooled.Judged.Verdict != verdict.Fail {
			t.Errorf("the repeat of 6 (repeat_of %d) reads %s, want fail: pooling must not undo a kill", pooled.RepeatOf, pooled.Judged.Verdict)
		}
		if !hasWarning(pooled.Judged.Warnings, "kill switch") {
			t.Errorf("the pooled step's warnings %q do not name the kill", pooled.Judged.Warnings)
		}
		if pooled.Windows <= killed.Windows {
			t.Errorf("the pooled step has %d windows, the killed run %d: want both runs'", pooled.Windows, killed.Windows)
		}
		if res.Capacity.AtLeast || res.Capacity.Hi > 6 || res.Capacity.LimitedBy != verdict.PartTTFT {
			t.Errorf("capacity %+v, want at most 6 sessions limited by ttft, not 'at least'", res.Capacity)
		}
		if !strings.Contains(res.StopReason, "kill switch") {
			t.Errorf("stop reason %q does not name the kill switch", res.StopReason)
		}
	})
}

func TestPoolKeepsAKilledRunsFail(t *testing.T) {
	p := judgedPlan()
	healthy := func(n int) []map[string]float64 { return gaugeRun(n, map[string]float64{running: 4, waiting: 0}) }
	// a run the kill switch ended after 20 s (two windows, passing on
	// what they measured), and a full clean 60 s run (six windows)
	short := JudgeStep(p, StepResult{Index: 3, Sessions: 4, RepeatOf: -1, End: 20, Killed: "P90 TTFT of the last window 37.4s is past 4 times the bar", KilledBy: verdict.PartTTFT},
		scrapes(healthy(5)), turns(20*time.Second))
	full := JudgeStep(p, StepResult{Index: 5, Sessions: 4, RepeatOf: 3, End: 60}, scrapes(healthy(13)), turns(60*time.Second))
	shortAgain := short
	shortAgain.Index, shortAgain.RepeatOf = 5, 3
	fullFirst := full
	fullFirst.Index, fullFirst.RepeatOf = 3, -1
	cases := []struct {
		name        string
		first, then StepResult
		want        verdict.Verdict
		warn        string
	}{
		// the first run was killed: the pooled verdict stays a fail
		{name: "first run killed", first: short, then: full, want: verdict.Fail, warn: "kill switch"},
		// the repeat was killed: the same
		{name: "repeat killed", first: fullFirst, then: shortAgain, want: verdict.Fail, warn: "kill switch"},
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
	// judged alone, the short run already reads fail on its ttft part
	if short.Judged.Verdict != verdict.Fail {
		t.Errorf("a killed run reads %s on its own, want fail", short.Judged.Verdict)
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
