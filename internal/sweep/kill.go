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

// failKilled makes a judged step fail on the part the kill switch's limit
// watched (ttft when the step does not say, as steps saved before
// killed_by was kept): the kill switch ends a step only when the recipe
// clearly cannot carry it, so what the step measured before the kill never
// passes it, alone or pooled with a repeat. who says which run was killed,
// tail (may be empty) ends the warning.
func failKilled(st verdict.Step, part, why, who, tail string) verdict.Step {
	if part == "" {
		part = verdict.PartTTFT
	}
	for i := range st.Parts {
		if st.Parts[i].Name == part {
			st.Parts[i].Verdict = verdict.Fail
			st.Parts[i].Value.Warnings = append(st.Parts[i].Value.Warnings, "failed by the kill switch: "+why)
		}
	}
	st.Verdict = verdict.Fail
	w := fmt.Sprintf("%s: %s; a run the kill switch ended fails, on %s", who, why, part)
	if tail != "" {
		w += "; " + tail
	}
	st.Warnings = append(st.Warnings, w)
	return st
}
