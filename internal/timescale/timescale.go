// Package timescale converts between modelled time and wall-clock time, so a
// rehearsal can run N times faster than the time its numbers describe.
//
// Everything headroom judges is in modelled seconds: the simulator reports its
// metrics in modelled time, and the load generator and sweep pace themselves on
// a Clock with the same scale. At scale 1 modelled time is wall time.
package timescale

import (
	"context"
	"fmt"
	"time"
)

// Clock measures modelled time since it was started. The zero value is not
// usable; make one with New.
type Clock struct {
	scale float64
	start time.Time
}

// New returns a clock started now that runs scale times faster than wall time.
func New(scale float64) (*Clock, error) {
	if scale <= 0 || scale > 10000 {
		return nil, fmt.Errorf("time scale %g is out of range: use a value in (0, 10000], 1 for real time", scale)
	}
	return &Clock{scale: scale, start: time.Now()}, nil
}

// NewAt returns a clock started now that reads at modelled time at: a
// resumed run continues the timeline of the run it resumes.
func NewAt(scale float64, at time.Duration) (*Clock, error) {
	c, err := New(scale)
	if err != nil {
		return nil, err
	}
	c.start = c.start.Add(-c.Real(at))
	return c, nil
}

// Scale is how many modelled seconds pass per wall-clock second.
func (c *Clock) Scale() float64 { return c.scale }

// Now is the modelled time elapsed since the clock started.
func (c *Clock) Now() time.Duration { return c.Modelled(time.Since(c.start)) }

// At converts a wall-clock instant to modelled time since the clock started.
func (c *Clock) At(t time.Time) time.Duration { return c.Modelled(t.Sub(c.start)) }

// Wall converts modelled time since the start back to a wall-clock instant.
func (c *Clock) Wall(d time.Duration) time.Time { return c.start.Add(c.Real(d)) }

// Real converts a modelled duration to the wall-clock duration it takes.
func (c *Clock) Real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.scale)
}

// Modelled converts a wall-clock duration to modelled time.
func (c *Clock) Modelled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.scale)
}

// Sleep waits for a modelled duration, or until ctx is done.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(c.Real(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SleepUntil waits until the modelled time reaches at, or until ctx is done.
func (c *Clock) SleepUntil(ctx context.Context, at time.Duration) error {
	return c.Sleep(ctx, at-c.Now())
}
