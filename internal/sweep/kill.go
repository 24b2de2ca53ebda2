package sweep

import (
	"fmt"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
)

// Kill is the kill switch: limits past which a step is ended early. Zero
// values turn a limit off.
type Kill struct {
	QueuePerSession float64 // waiting requests per session, growing over three scrapes
	ErrorRate       float64 // errors per turn sent in the last window
	TTFTFactor      float64 // P90 TTFT of the last window past this many times the bar
}

// kill checks the kill switch on the latest window of the judged time; it
// waits for one whole window, so warm-up never trips it.
func (r *Runner) kill(n int, from, now time.Duration) string {
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
		return ""
	}
	if k.QueuePerSession > 0 && len(samples) >= 3 {
		a, b, c := samples[len(samples)-3], samples[len(samples)-2], samples[len(samples)-1]
		w := c.Gauge[signal.Waiting]
		if w > k.QueuePerSession*float64(n) && w > b.Gauge[signal.Waiting] && b.Gauge[signal.Waiting] > a.Gauge[signal.Waiting] {
			return fmt.Sprintf("%.0f requests waiting and growing (limit %.0f for %d sessions)", w, k.QueuePerSession*float64(n), n)
		}
	}
	ws := signal.Windows(samples, now-r.Plan.Window, now, r.Plan.Window)
	if len(ws) == 0 {
		return ""
	}
	w := ws[len(ws)-1]
	if k.TTFTFactor > 0 {
		if h, ok := w.Hist[signal.TTFT]; ok {
			if v, _, _, ok := h.Quantile(0.9); ok && v > k.TTFTFactor*r.Plan.Bar.TTFTP90 {
				return fmt.Sprintf("P90 TTFT of the last window %.1fs is past %g times the bar", v, k.TTFTFactor)
			}
		}
	}
	if k.ErrorRate > 0 {
		errs := w.Counter[signal.HTTP4xx] + w.Counter[signal.HTTP5xx] + w.Counter[signal.RequestsAborted]
		done := errs + w.Counter[signal.RequestsOK]
		if done >= 10 && errs/done > k.ErrorRate {
			return fmt.Sprintf("%.0f%% of the last window's requests failed (limit %.0f%%)", 100*errs/done, 100*k.ErrorRate)
		}
	}
	return ""
}
