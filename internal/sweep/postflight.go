package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/signal"
)

// PostFlight says whether the engine went back to idle after the load stopped.
type PostFlight struct {
	Idle     bool    `json:"idle"`
	WaitedS  float64 `json:"waited_s"`
	Running  float64 `json:"running"`
	Waiting  float64 `json:"waiting"`
	Detail   string  `json:"detail,omitempty"`
	Verified bool    `json:"verified"` // the gauges were present to check it
}

// awaitIdle polls the server until the engine has nothing running or
// waiting, at most until the drain time has passed since start. It stops
// early when the server has no running/waiting gauges, since idleness cannot
// be checked then.
func (r *Runner) awaitIdle(ctx context.Context, start time.Duration) PostFlight {
	c := r.Clock
	var pf PostFlight
	if gone := r.metricsGone(); gone != nil {
		// nothing to read idleness from: say why, once, without waiting
		pf.Detail = "idleness could not be checked: " + gone.Error()
		return pf
	}
	for {
		s, err := r.Source.Scrape(ctx, c.Now())
		if err == nil {
			running, okR := s.Gauge[signal.Running]
			waiting, okW := s.Gauge[signal.Waiting]
			pf.Running, pf.Waiting, pf.Verified = running, waiting, okR && okW
			if pf.Verified && running == 0 && waiting == 0 {
				pf.Idle = true
				break
			}
			if !pf.Verified {
				pf.Detail = "the server reports no running/waiting gauges, so idleness could not be checked"
				if r.hadGauges() {
					// the gauges were there during the run (a NaN, which
					// the mapping drops, reads as absent): a check that
					// could not be made, not a server without them
					pf.Detail = "the running/waiting gauges the server reported during the run are gone or not numbers (NaN), so idleness could not be checked"
				}
				break
			}
		}
		if c.Now()-start > r.Plan.Drain || ctx.Err() != nil {
			pf.Detail = fmt.Sprintf("the engine was not idle after %s: %g running, %g waiting", fmtDur(r.Plan.Drain), pf.Running, pf.Waiting)
			if err != nil {
				pf.Detail = "metrics unreachable after the load stopped: " + err.Error()
			}
			break
		}
		_ = c.Sleep(ctx, r.Plan.Scrape/5)
	}
	pf.WaitedS = (c.Now() - start).Seconds()
	return pf
}

// postFlight stops the load and waits until the engine has nothing running
// or waiting: a run is not over until the engine is back where it started.
func (r *Runner) postFlight(ctx context.Context) PostFlight {
	c := r.Clock
	r.Load.SetTag(load.Tag{Step: len(r.Plan.Ladder), Phase: load.PhaseDrain})
	start := c.Now()
	// Requests still in flight when four fifths of the drain have passed are
	// cancelled; the last fifth is for those aborts to reach the engine,
	// which through a gateway takes a moment.
	grace := c.Real(r.Plan.Drain * 4 / 5)
	if ctx.Err() != nil {
		grace = 0 // interrupted: cancel what is in flight now
	}
	r.Load.Stop(grace)
	// a fresh context: post-flight runs even when the sweep was interrupted
	pctx, cancel := c.WithTimeout(context.WithoutCancel(ctx), r.Plan.Drain+c.Modelled(time.Second))
	defer cancel()
	pf := r.awaitIdle(pctx, start)
	if pf.Idle {
		r.logf("post-flight: engine idle after %.0fs", pf.WaitedS)
	} else {
		r.logf("post-flight: %s", pf.Detail)
	}
	return pf
}

// hadGauges reports whether some scrape of the run held both the running
// and the waiting gauge.
func (r *Runner) hadGauges() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		_, okR := s.Gauge[signal.Running]
		_, okW := s.Gauge[signal.Waiting]
		if okR && okW {
			return true
		}
	}
	return false
}
