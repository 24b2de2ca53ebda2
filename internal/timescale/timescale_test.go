package timescale

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestScaledSleepTakesScaledWallTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New(60)
		if err != nil {
			t.Fatal(err)
		}
		wall := time.Now()
		if err := c.Sleep(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(wall); got != time.Second {
			t.Errorf("a modelled minute at scale 60 took %v of wall time, want 1s", got)
		}
		if got := c.Now(); got != time.Minute {
			t.Errorf("modelled now = %v, want 1m", got)
		}
		if got := c.At(c.Wall(90 * time.Second)); got != 90*time.Second {
			t.Errorf("At(Wall(90s)) = %v, want 90s", got)
		}
	})
}

func TestSleepStopsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := New(1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := c.Sleep(ctx, time.Hour); err == nil {
			t.Error("Sleep returned nil after its context was cancelled")
		}
		if got := c.Now(); got != time.Second {
			t.Errorf("Sleep returned at %v, want at the 1s cancel", got)
		}
	})
}

func TestNewRejectsBadScale(t *testing.T) {
	for _, s := range []float64{0, -1, 1e6} {
		if _, err := New(s); err == nil {
			t.Errorf("New(%g) returned no error", s)
		}
	}
}

func TestNewAtContinuesATimeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := NewAt(10, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Now(); got != time.Hour {
			t.Errorf("a clock made at 1h reads %v", got)
		}
		c.Sleep(context.Background(), time.Minute)
		if got := c.Now(); got != time.Hour+time.Minute {
			t.Errorf("after a modelled minute it reads %v, want 1h1m", got)
		}
	})
}
