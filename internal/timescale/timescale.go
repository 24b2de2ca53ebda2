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
	"sync"
	"time"
)

// Clock measures modelled time since it was started. The zero value is not
// usable; make one with New.
type Clock struct {
	scale float64
	start time.Time
	v     *virtual // nil: wall time drives the clock
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

// Origin is the wall-clock instant a wall clock reads 0 at (Start minus
// the modelled time it began at), for NewFrom in another process.
func (c *Clock) Origin() time.Time { return c.start }

// NewFrom returns a wall clock that reads 0 at origin, another process's
// Origin: the shards of a sweep stamp their records on the coordinator's
// timeline (to the hosts' clock agreement: NTP's milliseconds).
func NewFrom(scale float64, origin time.Time) (*Clock, error) {
	c, err := New(scale)
	if err != nil {
		return nil, err
	}
	c.start = origin
	return c, nil
}

// Scale is how many modelled seconds pass per wall-clock second.
func (c *Clock) Scale() float64 { return c.scale }

// Now is the modelled time elapsed since the clock started.
func (c *Clock) Now() time.Duration {
	if v := c.v; v != nil {
		return time.Duration(v.nowA.Load())
	}
	return c.Modelled(time.Since(c.start))
}

// Time is the instant Now stands for: the wall clock's time.Now, or on a
// virtual clock an instant that moves with modelled time. Stamps taken with
// it convert back with At.
func (c *Clock) Time() time.Time {
	if c.v != nil {
		return c.start.Add(c.Now())
	}
	return time.Now()
}

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
	if c.v != nil {
		if d < 0 {
			d = 0
		}
		_, err := c.v.wait(ctx, c.Now()+d, "sleep", nil)
		return err
	}
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
	if c.v != nil {
		_, err := c.v.wait(ctx, max(at, 0), "sleep", nil)
		return err
	}
	return c.Sleep(ctx, at-c.Now())
}

// WithCancel is context.WithCancel for contexts that goroutines on the
// clock wait on: on a virtual clock, cancelling wakes them before the turn
// passes on.
func (c *Clock) WithCancel(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	if c.v == nil {
		return ctx, cancel
	}
	return ctx, func() { cancel(); c.v.cancelled() }
}

// WithTimeout is context.WithTimeout with d in modelled time: on a virtual
// clock the deadline is a modelled instant, and the context's error after
// it is context.DeadlineExceeded.
func (c *Clock) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if c.v == nil {
		return context.WithTimeout(parent, c.Real(d))
	}
	ctx, cancel := context.WithCancelCause(parent)
	stop := c.v.after(c.Now()+max(d, 0), func() { cancel(context.DeadlineExceeded); c.v.cancelled() })
	return deadlineCtx{ctx}, func() {
		stop()
		cancel(context.Canceled)
		c.v.cancelled()
	}
}

// deadlineCtx reports a modelled deadline's expiry as
// context.DeadlineExceeded, as context.WithTimeout does.
type deadlineCtx struct{ context.Context }

func (d deadlineCtx) Err() error {
	err := d.Context.Err()
	if err != nil && context.Cause(d.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// Group runs goroutines on the clock and waits for them, as a
// sync.WaitGroup does, with a wait the clock knows about.
type Group struct {
	c    *Clock
	mu   sync.Mutex
	n    int
	zero *Signal
}

// NewGroup returns an empty group.
func (c *Clock) NewGroup() *Group { return &Group{c: c, zero: c.NewSignal()} }

// Go runs f in a new goroutine of the group.
func (g *Group) Go(f func()) {
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	g.c.Go(func() {
		defer func() {
			g.mu.Lock()
			g.n--
			n := g.n
			g.mu.Unlock()
			if n == 0 {
				g.zero.Poke()
			}
		}()
		f()
	})
}

// Wait waits until every goroutine of the group has returned, or ctx is
// done.
func (g *Group) Wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		n := g.n
		g.mu.Unlock()
		if n == 0 {
			return nil
		}
		if _, err := g.c.WaitFor(ctx, "group", -1, g.zero); err != nil {
			return err
		}
	}
}
