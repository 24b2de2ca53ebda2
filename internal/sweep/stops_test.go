package sweep

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// scrapes builds samples 5 s apart from 0 s, one per gauge map, of an engine
// that makes steady progress (ten requests of 1 s TTFT and 30 ms per token
// each scrape, no error), so only the gauges differ between cases.
func scrapes(gauges []map[string]float64) []signal.Sample {
	ttft := stats.Histogram{Upper: ttftBounds, Cumulative: make([]float64, len(ttftBounds))}
	tpot := stats.Histogram{Upper: tpotBounds, Cumulative: make([]float64, len(tpotBounds))}
	var out []signal.Sample
	for k, g := range gauges {
		if k > 0 {
			observe(&ttft, 1, 40)
			observe(&tpot, 0.03, 40)
		}
		s := signal.NewSample(time.Duration(k) * 5 * time.Second)
		s.Hist[signal.TTFT], s.Hist[signal.TPOT] = ttft.Clone(), tpot.Clone()
		s.Counter[signal.RequestsOK] = float64(40 * k)
		s.Counter[signal.GenerationTokens] = float64(1000 * k)
		for _, c := range []string{signal.HTTP4xx, signal.HTTP5xx, signal.RequestsAborted} {
			s.Counter[c] = 0
		}
		for name, v := range g {
			s.Gauge[name] = v
		}
		out = append(out, s)
	}
	return out
}

// turns are 40 successful judged turns every 5 s from 0 to end, the
// turns scrapes counts.
func turns(end time.Duration) []load.Record {
	var out []load.Record
	for t := time.Duration(0); t < end; t += 5 * time.Second {
		for i := 0; i < 40; i++ {
			out = append(out, load.Record{V: load.RecordVersion, Phase: load.PhaseMeasure, Lane: i, Send: t.Seconds() + 0.1, FirstToken: t.Seconds() + 1.1, LastToken: t.Seconds() + 2, PlannedPromptTokens: 10, ServedPromptTokens: 10})
		}
	}
	return out
}

// gaugeRun is n scrapes of the same gauges.
func gaugeRun(n int, g map[string]float64) []map[string]float64 {
	out := make([]map[string]float64, n)
	for i := range out {
		out[i] = g
	}
	return out
}

func joinRuns(runs ...[]map[string]float64) []map[string]float64 {
	var out []map[string]float64
	for _, r := range runs {
		out = append(out, r...)
	}
	return out
}

// judgedPlan is the plan the stop-rule tests judge with: 10 s windows over a
// 60 s judged time on a 5 s scrape grid, the KV-full stop at 98%.
func judgedPlan() Plan {
	opts := verdict.DefaultOptions()
	opts.Resamples = 200
	return Plan{Ladder: []int{4}, Warmup: 10 * time.Second, Step: 60 * time.Second, Window: 10 * time.Second,
		Scrape: 5 * time.Second, Drain: 30 * time.Second, KVFull: 0.98,
		Bar: verdict.Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02}, Options: opts}
}

const (
	kv      = signal.KVCacheUsage
	running = signal.Running
	waiting = signal.Waiting
)

func TestKVFullStopLooksAtThePeakAndAtAnEngineThatAdmitsNothing(t *testing.T) {
	cases := []struct {
		name   string
		kvFull float64 // 0 keeps the plan's 98%; -1 turns the KV share tests off
		gauges []map[string]float64
		stop   string // a phrase of the stop reason; "" when the climb goes on
		peak   float64
	}{
		// the rule as it was: the cache was full on average over the step
		{name: "full on average", gauges: gaugeRun(13, map[string]float64{kv: 0.99, running: 4, waiting: 0}), stop: "stayed full", peak: 0.99},
		// the case: the cache fills in the last third of the step
		// and requests queue behind it; the mean (72%) never reaches 98%
		{name: "fills late with a queue", gauges: joinRuns(gaugeRun(8, map[string]float64{kv: 0.4, running: 4, waiting: 0}), gaugeRun(5, map[string]float64{kv: 1, running: 1, waiting: 3})), stop: "KV cache filled", peak: 1},
		// a busy healthy engine: the cache touches 99% at one scrape with
		// nothing waiting (the simulator's passing 8-session step does
		// this); the climb goes on
		{name: "full for a moment, nothing waits", gauges: joinRuns(gaugeRun(6, map[string]float64{kv: 0.6, running: 4, waiting: 0}), gaugeRun(1, map[string]float64{kv: 0.99, running: 4, waiting: 0}), gaugeRun(6, map[string]float64{kv: 0.6, running: 4, waiting: 0})), peak: 0.99},
		// full with a queue at one scrape only is a moment, not a stretch
		{name: "full with a queue at one scrape", gauges: joinRuns(gaugeRun(6, map[string]float64{kv: 0.6, running: 4, waiting: 0}), gaugeRun(1, map[string]float64{kv: 1, running: 4, waiting: 2}), gaugeRun(6, map[string]float64{kv: 0.6, running: 4, waiting: 0})), peak: 1},
		// requests wait and nothing runs over four scrapes: the engine
		// admits nothing, whatever its KV gauge says (here none at all)
		{name: "waiting with nothing running", gauges: joinRuns(gaugeRun(9, map[string]float64{running: 3, waiting: 0}), gaugeRun(4, map[string]float64{running: 0, waiting: 3})), stop: "nothing running"},
		// the same at one scrape is a request caught between arriving and
		// being scheduled
		{name: "nothing running for one scrape", gauges: joinRuns(gaugeRun(6, map[string]float64{running: 3, waiting: 0}), gaugeRun(1, map[string]float64{running: 0, waiting: 1}), gaugeRun(6, map[string]float64{running: 3, waiting: 0}))},
		// kv_full off turns off the KV share tests, not the check that
		// the engine admits anything
		{name: "kv_full off, nothing running", kvFull: -1, gauges: joinRuns(gaugeRun(9, map[string]float64{kv: 1, running: 3, waiting: 0}), gaugeRun(4, map[string]float64{kv: 1, running: 0, waiting: 3})), stop: "nothing running", peak: 1},
		{name: "kv_full off, full with a queue", kvFull: -1, gauges: gaugeRun(13, map[string]float64{kv: 1, running: 3, waiting: 3}), peak: 1},
		// without a running gauge nothing says the engine ran nothing
		{name: "no running gauge", gauges: joinRuns(gaugeRun(9, map[string]float64{waiting: 0}), gaugeRun(4, map[string]float64{waiting: 3}))},
		// between turns an idle engine has nothing running and nothing
		// waiting: no stop
		{name: "idle between turns", gauges: gaugeRun(13, map[string]float64{kv: 0, running: 0, waiting: 0})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := judgedPlan()
			if c.kvFull < 0 {
				p.KVFull = 0
			}
			step := StepResult{Index: 0, Sessions: 4, RepeatOf: -1, MeasureStart: 0, End: 60}
			step = JudgeStep(p, step, scrapes(c.gauges), turns(60*time.Second))
			if step.KVCachePeak != c.peak {
				t.Errorf("KV cache peak %g, want %g", step.KVCachePeak, c.peak)
			}
			// the stop rules, whatever the step's verdict: the verdict has
			// its own tests
			step.Judged.Verdict = verdict.Pass
			why := missed(p, step)
			switch {
			case c.stop == "" && why != "":
				t.Errorf("the climb stopped (%q), want it to go on", why)
			case c.stop != "" && !strings.Contains(why, c.stop):
				t.Errorf("stop reason %q, want one with %q (KV peak %g, full with a queue %gs, waiting with nothing running %gs)", why, c.stop, step.KVCachePeak, step.KVFullWaitingS, step.WaitingIdleS)
			}
		})
	}
}

func TestSweepStopsWhenTheKVCacheFillsMidStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 0.5 s per session: 2, 4 and 6 sessions all pass the bar. At 4 sessions
		// the KV cache fills from the ninth scrape on (the last part of the
		// judged time) with three requests waiting; its mean stays well under
		// 98%, so a stop on the mean alone climbs on to 6.
		r, _, eng := newRunnerEngine(t, []int{2, 4, 6}, 0.5)
		r.Plan.KVFull = 0.98
		eng.gauges = func(n float64, k int) map[string]float64 {
			if n == 4 && k >= 8 {
				return map[string]float64{kv: 1, waiting: 3}
			}
			return map[string]float64{kv: 0.3}
		}
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, s := range res.Steps {
			got = append(got, s.Sessions)
		}
		if len(got) != 2 || got[1] != 4 {
			t.Fatalf("steps ran at %v, want 2 and 4: the sweep stops after the step whose KV cache filled", got)
		}
		if !strings.Contains(res.StopReason, "KV cache filled") || res.Steps[1].KVCachePeak != 1 || res.Steps[1].KVCacheMean >= 0.98 {
			t.Errorf("stop %q, KV peak %g, mean %g: want the KV stop on a peak of 1 with a mean under 98%%", res.StopReason, res.Steps[1].KVCachePeak, res.Steps[1].KVCacheMean)
		}
	})
}

func TestTurnsStillWaitingAtTheStepsEndCountAsSentAndUnfinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// one turn goes out in the judged time and never gets an outcome (a
		// request stuck waiting on a full KV cache): live, it is sent and
		// unfinished, never dropped from the step
		r, _, eng := newRunnerEngine(t, []int{2}, 0.5)
		eng.hang = true
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st := res.Steps[0]
		if st.Load.Unfinished != 1 || st.Load.Sent != st.Load.Planned || st.Load.Sent == 0 {
			t.Fatalf("load %+v: want the stuck turn sent, planned and unfinished", st.Load)
		}
		// re-judged from records.jsonl, the same turn has the outcome the
		// post-flight gave it (aborted once the load stopped): still sent and
		// unfinished, so the figures agree
		var recs []load.Record
		for _, rec := range r.Book.All() {
			if rec.Step == 0 && rec.Phase == load.PhaseMeasure {
				recs = append(recs, rec)
			}
		}
		stuck := eng.stuck[0]
		stuck.Error, stuck.Status = load.ErrAborted, 0
		recs = append(recs, stuck)
		again := JudgeStep(r.Plan, StepResult{Index: 0, Sessions: 2, RepeatOf: -1, MeasureStart: st.MeasureStart, End: st.End, Load: st.Load}, r.Samples(), recs)
		if again.Load.Unfinished != 1 || again.Load.Sent != st.Load.Sent || again.Load.Planned != st.Load.Planned {
			t.Errorf("re-judged load %+v, live %+v: want the same sent, planned and unfinished turns", again.Load, st.Load)
		}
	})
}
