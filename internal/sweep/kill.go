package sweep

import (
	"fmt"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Kill is the kill switch: limits past which a step is ended early. Zero
// values turn a limit off.
type Kill struct {
	QueuePerSession float64 // waiting requests per session, growing over three scrapes
	ErrorRate       float64 // errors per turn sent in the last window
	TTFTFactor      float64 // P90 TTFT of the last window past this many times the bar
}

// kill checks the kill switch on the latest window of the judged time; it
// waits for one whole window, so warm-up never trips it. It returns why it
// tripped ("" when it did not) and the bar part the tripped limit watches:
// a growing queue and a slow first token are ttft, failing requests errors.
func (r *Runner) kill(n int, from, now time.Duration) (why, part string) {
	k := r.Plan.Kill
	r.mu.Lock()
	var samples []signal.Sample
	for _, s := range r.samples {
		if s.At >= from {
			samples = append(samples, s)
		}
	}
	r.mu.Unlock()
	if len(samples) < 2 || now-from < r.Plan.Window {
		return "", ""
	}
	if k.QueuePerSession > 0 && len(samples) >= 3 {
		a, b, c := samples[len(samples)-3], samples[len(samples)-2], samples[len(samples)-1]
		w := c.Gauge[signal.Waiting]
		if w > k.QueuePerSession*float64(n) && w > b.Gauge[signal.Waiting] && b.Gauge[signal.Waiting] > a.Gauge[signal.Waiting] {
			return fmt.Sprintf("%.0f requests waiting and growing (limit %.0f for %d sessions)", w, k.QueuePerSession*float64(n), n), verdict.PartTTFT
		}
	}
	ws := signal.Windows(samples, now-r.Plan.Window, now, r.Plan.Window)
	if len(ws) == 0 {
		return "", ""
	}
	w := ws[len(ws)-1]
	if k.TTFTFactor > 0 {
		if h, ok := w.Hist[signal.TTFT]; ok {
			if v, _, _, ok := h.Quantile(0.9); ok && v > k.TTFTFactor*r.Plan.Bar.TTFTP90 {
				return fmt.Sprintf("P90 TTFT of the last window %.1fs is past %g times the bar", v, k.TTFTFactor), verdict.PartTTFT
			}
		}
	}
	if k.ErrorRate > 0 {
		errs := w.Counter[signal.HTTP4xx] + w.Counter[signal.HTTP5xx] + w.Counter[signal.RequestsAborted] + w.Counter[signal.RequestsFailed]
		done := errs + w.Counter[signal.RequestsOK]
		if done >= 10 && errs/done > k.ErrorRate {
			return fmt.Sprintf("%.0f%% of the last window's requests failed (limit %.0f%%)", 100*errs/done, 100*k.ErrorRate), verdict.PartErrors
		}
	}
	return "", ""
}

// judgeKilled is the verdict of a judged step one of whose runs the kill
// switch ended (part is the bar part its tripped limit watches; ttft when
// the step does not say, as steps saved before killed_by was kept). The kill
// switch protects the fleet; it decides no verdict. The step's data do: the
// watched part fails only when its interval lies beyond the bar (a latency
// part measured on too few windows to resample has no interval, only its
// bucket, and reads too close), and is no data when nothing was measured. What a killed run measured cannot pass
// that part, alone or pooled with a repeat: the run stopped because it was
// going wrong, so the windows it did not measure would have read worse, and
// a part whose data pass reads too close instead. The other parts keep
// their verdicts; the step's is the worst of its parts. who says which run
// was killed, tail (may be empty) ends the warning.
func judgeKilled(st verdict.Step, part, why, who, tail string) verdict.Step {
	if part == "" {
		part = verdict.PartTTFT
	}
	read := ""
	for i := range st.Parts {
		q := &st.Parts[i]
		if q.Name == verdict.PartTTFT || q.Name == verdict.PartInteractivity {
			// what the run did not measure would have read worse: the
			// interval it claims is open on the bad side (Part.Bounds)
			q.CutShort = true
		}
		if q.Name != part {
			if q.CutShort && q.Verdict == verdict.Pass {
				q.Verdict = verdict.TooClose
				q.Value.Warnings = append(q.Value.Warnings, "the kill switch ended a run of this step ("+why+"): the windows it did not run would have read no better, so this part's interval is open on the bad side and it reads too close, not pass")
			}
			continue
		}
		switch q.Verdict {
		case verdict.Pass:
			q.Verdict = verdict.TooClose
			q.Value.Warnings = append(q.Value.Warnings, "the kill switch ended a run of this step ("+why+"): its data are within the bar, but a run cut short cannot pass, so it reads too close")
			read = "its data are within the bar, so it reads too close (a cut-short run cannot pass)"
		case verdict.Fail:
			if q.Spread == nil && q.Name != verdict.PartErrors {
				// too few windows to resample: the bucket alone is no
				// interval, and one window cannot show a step beyond the bar
				q.Verdict = verdict.TooClose
				q.Value.Warnings = append(q.Value.Warnings, "the kill switch ended a run of this step ("+why+") before it had windows enough to resample: a value from one window is beyond the bar, but without an interval it reads too close")
				read = "it measured too few windows for an interval, so it reads too close (one window decides nothing)"
				break
			}
			read = "its interval is beyond the bar, so it fails"
		case verdict.TooClose:
			read = "its interval crosses the bar, so it reads too close"
		default:
			read = "it measured too little to judge, so it reads " + string(q.Verdict)
		}
	}
	st.Verdict = verdict.Pass
	for _, q := range st.Parts {
		st.Verdict = verdict.Worse(st.Verdict, q.Verdict)
	}
	w := fmt.Sprintf("%s: %s; the kill switch decides no verdict: %s is judged on what was measured", who, why, part)
	if read != "" {
		w += ", and " + read
	}
	if tail != "" {
		w += "; " + tail
	}
	st.Warnings = append(st.Warnings, w)
	return st
}
