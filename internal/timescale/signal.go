package timescale

import (
	"context"
	"sync"
	"time"
)

// Signal wakes a goroutine that waits on it through Clock.Wait. A signal
// from NewSignal holds one poke until a waiter takes it, as a channel with a
// buffer of one does; a latch from NewLatch, once closed, wakes every waiter
// now and later. On a virtual clock a poke readies the waiter at the same
// modelled instant.
type Signal struct {
	c     *Clock
	latch bool
	ch    chan struct{} // wall clock: buffered 1, or closed for a latch
	once  sync.Once

	// virtual clock, under c.v.mu
	pending bool
	closed  bool
	waiters []*waiter
}

// NewSignal returns a signal that holds one poke.
func (c *Clock) NewSignal() *Signal {
	s := &Signal{c: c}
	if c.v == nil {
		s.ch = make(chan struct{}, 1)
	}
	return s
}

// NewLatch returns a signal that stays set once closed.
func (c *Clock) NewLatch() *Signal {
	s := &Signal{c: c, latch: true}
	if c.v == nil {
		s.ch = make(chan struct{})
	}
	return s
}

// Poke sets the signal (closes a latch). It never blocks.
func (s *Signal) Poke() {
	if s.latch {
		s.Close()
		return
	}
	v := s.c.v
	if v == nil {
		select {
		case s.ch <- struct{}{}:
		default:
		}
		return
	}
	v.mu.Lock()
	defer v.unlock()
	for len(s.waiters) > 0 {
		w := s.waiters[0]
		n := copy(s.waiters, s.waiters[1:]) // keeps the slice's room for the next wait
		s.waiters[n] = nil
		s.waiters = s.waiters[:n]
		i := s.index(w) // -1: a waiter that no longer waits here (waiters are reused)
		if w.state != wsParked || i < 0 {
			continue
		}
		w.woke = i
		v.ready(w)
		if v.idle {
			v.dispatch()
		}
		return
	}
	s.pending = true
}

// Close latches the signal: every waiter wakes, now and later.
func (s *Signal) Close() {
	s.once.Do(func() {
		v := s.c.v
		if v == nil {
			if s.latch {
				close(s.ch)
			} else {
				s.Poke()
			}
			return
		}
		v.mu.Lock()
		defer v.unlock()
		s.closed = true
		ws := s.waiters
		s.waiters = nil
		for _, w := range ws {
			if i := s.index(w); w.state == wsParked && i >= 0 {
				w.woke = i
				v.ready(w)
			}
		}
		if v.idle && len(v.runq) > 0 {
			v.dispatch()
		}
	})
}

// IsSet reports whether a latch is closed.
func (s *Signal) IsSet() bool {
	if v := s.c.v; v != nil {
		v.mu.Lock()
		defer v.mu.Unlock()
		return s.closed
	}
	if !s.latch {
		return false
	}
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}

func (s *Signal) index(w *waiter) int {
	for i, t := range w.sigs {
		if t == s {
			return i
		}
	}
	return -1
}

// takeLocked takes a pending poke or sees a closed latch (under v.mu).
func (s *Signal) takeLocked() bool {
	if s.closed {
		return true
	}
	if s.pending {
		s.pending = false
		return true
	}
	return false
}

// drop forgets a waiter that woke for another reason (under v.mu).
func (s *Signal) drop(w *waiter) {
	for i, t := range s.waiters {
		if t == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			return
		}
	}
}

// Wait blocks until one of sigs is set (it returns its index; a poke is
// taken), modelled time reaches until (-1; until < 0 means no deadline), or
// ctx is done (its error). At most three signals.
func (c *Clock) Wait(ctx context.Context, until time.Duration, sigs ...*Signal) (int, error) {
	return c.WaitFor(ctx, "wait", until, sigs...)
}

// WaitFor is Wait with a word on what it waits for, which a virtual clock's
// deadlock report names.
func (c *Clock) WaitFor(ctx context.Context, reason string, until time.Duration, sigs ...*Signal) (int, error) {
	if c.v != nil {
		return c.v.wait(ctx, until, reason, sigs)
	}
	if len(sigs) > 3 {
		panic("timescale: Wait takes at most three signals")
	}
	var tc <-chan time.Time
	if until >= 0 {
		d := time.Until(c.Wall(until))
		if d <= 0 {
			// Take a signal that is already set before giving up.
			for i, s := range sigs {
				if s.tryWall() {
					return i, nil
				}
			}
			return -1, ctx.Err()
		}
		t := time.NewTimer(d)
		defer t.Stop()
		tc = t.C
	}
	var c0, c1, c2 chan struct{}
	switch len(sigs) {
	case 3:
		c2 = sigs[2].ch
		fallthrough
	case 2:
		c1 = sigs[1].ch
		fallthrough
	case 1:
		c0 = sigs[0].ch
	}
	select {
	case <-ctx.Done():
		return -2, ctx.Err()
	case <-tc:
		return -1, nil
	case <-c0:
		return 0, nil
	case <-c1:
		return 1, nil
	case <-c2:
		return 2, nil
	}
}

func (s *Signal) tryWall() bool {
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}
