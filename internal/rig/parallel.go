package rig

import (
	"context"
	"sync"
)

// Parallel calls f(ctx, i) for i in [0, n) on at most workers goroutines at
// once and returns when every call has returned. A run on the virtual clock
// keeps one goroutine busy at a time, so workers is about how many cores a
// batch of runs (a study, a fidelity table, a recommender's candidates)
// uses. The first error any call returns cancels the context the others
// were given, no further call starts, and that error is returned; a caller
// that keeps going past a failed run records the failure itself and
// returns nil. Once ctx is done no further call starts either.
func Parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return first
}
