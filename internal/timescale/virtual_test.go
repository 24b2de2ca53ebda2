package timescale

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestVirtualSleepsTakeNoWallTime: three sleeps of one to three modelled
// hours wake in order of their ends, at their modelled times. Were any of them
// waited for on the wall clock, the run would take an hour or more: the guard
// fails it after a minute, a bound no loaded host comes near.
func TestVirtualSleepsTakeNoWallTime(t *testing.T) {
	const hang = time.Minute
	c := NewVirtual()
	var order []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(func() {
			g := c.NewGroup()
			for i, d := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
				g.Go(func() {
					if err := c.Sleep(context.Background(), d); err != nil {
						t.Error(err)
					}
					order = append(order, fmt.Sprintf("%d@%v", i, c.Now()))
				})
			}
			if err := g.Wait(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(hang):
		t.Fatalf("six modelled hours of sleeps had not ended after %v of wall time: the virtual clock waits on the wall clock", hang)
	}
	if got, want := strings.Join(order, " "), "1@1h0m0s 2@2h0m0s 0@3h0m0s"; got != want {
		t.Errorf("wake order %q, want %q", got, want)
	}
}

func TestVirtualIsDeterministic(t *testing.T) {
	run := func() string {
		c := NewVirtual()
		var b strings.Builder
		c.Run(func() {
			g := c.NewGroup()
			sig := c.NewSignal()
			for i := range 20 {
				g.Go(func() {
					for k := range 5 {
						_ = c.Sleep(context.Background(), time.Duration((i*7+k*3)%5)*time.Millisecond)
						fmt.Fprintf(&b, "%d.%d@%v ", i, k, c.Now())
						if i == 3 {
							sig.Poke()
						}
					}
				})
			}
			g.Go(func() {
				for range 5 {
					if _, err := c.Wait(context.Background(), -1, sig); err != nil {
						t.Error(err)
					}
					fmt.Fprintf(&b, "sig@%v ", c.Now())
				}
			})
			_ = g.Wait(context.Background())
		})
		return b.String()
	}
	first := run()
	for range 5 {
		if again := run(); again != first {
			t.Fatalf("two runs differ:\n%s\n%s", first, again)
		}
	}
}

func TestVirtualCancelWakesWaitersAtOnce(t *testing.T) {
	c := NewVirtual()
	c.Run(func() {
		ctx, cancel := c.WithCancel(context.Background())
		woke := c.NewLatch()
		var at time.Duration
		c.Go(func() {
			err := c.Sleep(ctx, time.Hour)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Sleep returned %v, want canceled", err)
			}
			at = c.Now()
			woke.Close()
		})
		_ = c.Sleep(context.Background(), time.Minute)
		cancel()
		if _, err := c.Wait(context.Background(), -1, woke); err != nil {
			t.Fatal(err)
		}
		if at != time.Minute {
			t.Errorf("the cancelled sleeper woke at %v, want 1m (the cancel)", at)
		}
	})
}

func TestVirtualTimeout(t *testing.T) {
	c := NewVirtual()
	c.Run(func() {
		ctx, cancel := c.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sig := c.NewSignal()
		i, err := c.Wait(ctx, -1, sig)
		if i != -2 || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("Wait = %d, %v (ctx %v), want the deadline", i, err, ctx.Err())
		}
		if c.Now() != 30*time.Second {
			t.Errorf("the deadline struck at %v, want 30s", c.Now())
		}
		// A cancelled timeout never fires.
		ctx2, cancel2 := c.WithTimeout(context.Background(), time.Second)
		cancel2()
		_ = c.Sleep(context.Background(), time.Minute)
		if !errors.Is(ctx2.Err(), context.Canceled) {
			t.Errorf("a cancelled timeout's context says %v", ctx2.Err())
		}
	})
}

func TestVirtualSignalHoldsOnePoke(t *testing.T) {
	c := NewVirtual()
	c.Run(func() {
		s := c.NewSignal()
		s.Poke()
		s.Poke()
		if i, _ := c.Wait(context.Background(), c.Now()+time.Second, s); i != 0 {
			t.Errorf("the first wait took %d, want the poke", i)
		}
		if i, _ := c.Wait(context.Background(), c.Now()+time.Second, s); i != -1 {
			t.Errorf("the second wait took %d, want the deadline (one poke is held, not two)", i)
		}
		l := c.NewLatch()
		l.Close()
		for range 2 {
			if i, _ := c.Wait(context.Background(), -1, s, l); i != 1 {
				t.Errorf("a closed latch woke %d, want 1", i)
			}
		}
	})
}

func TestVirtualDeadlockIsReported(t *testing.T) {
	c := NewVirtual()
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "deadlock") {
			t.Errorf("a wait nothing can end gave %v, want a deadlock panic", r)
		}
	}()
	c.Run(func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, _ = c.WaitFor(ctx, "nothing", -1, c.NewSignal())
	})
}

func TestWallSignalAndGroup(t *testing.T) {
	c, _ := New(1000)
	s := c.NewSignal()
	g := c.NewGroup()
	g.Go(func() { s.Poke() })
	if i, err := c.Wait(context.Background(), c.Now()+time.Hour, s); i != 0 || err != nil {
		t.Errorf("Wait = %d, %v", i, err)
	}
	if err := g.Wait(context.Background()); err != nil {
		t.Error(err)
	}
	l := c.NewLatch()
	l.Close()
	l.Close()
	if !l.IsSet() {
		t.Error("a closed latch is not set")
	}
	ctx, cancel := c.WithTimeout(context.Background(), time.Second)
	defer cancel()
	<-ctx.Done()
}
