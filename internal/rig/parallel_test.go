package rig

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestParallel: every index runs once on at most workers goroutines; the
// first error stops what has not started and is returned.
func TestParallel(t *testing.T) {
	var running, peak, calls atomic.Int64
	seen := make([]atomic.Int64, 20)
	err := Parallel(context.Background(), 20, 3, func(ctx context.Context, i int) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		seen[i].Add(1)
		calls.Add(1)
		running.Add(-1)
		return nil
	})
	if err != nil || calls.Load() != 20 || peak.Load() > 3 {
		t.Fatalf("err %v, %d calls, %d at once; want nil, 20, at most 3", err, calls.Load(), peak.Load())
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Errorf("index %d ran %d times", i, seen[i].Load())
		}
	}
	boom := errors.New("boom")
	calls.Store(0)
	err = Parallel(context.Background(), 1000, 1, func(ctx context.Context, i int) error {
		calls.Add(1)
		if i == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() > 4 {
		t.Errorf("err %v after %d calls: want boom, and no more than a call past it", err, calls.Load())
	}
}
