package rig

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/shard"
)

// stepWatch is a progress writer that closes reached once a line holds mark.
type stepWatch struct {
	mark    string
	once    sync.Once
	reached chan struct{}
	mu      sync.Mutex
	log     strings.Builder
}

func (w *stepWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.log.Write(b)
	w.mu.Unlock()
	if strings.Contains(string(b), w.mark) {
		w.once.Do(func() { close(w.reached) })
	}
	return len(b), nil
}

// TestALostShardMakesItsStepNoData: four shards over loopback HTTP (the
// others in this process, as RunShard), one of which dies in step 2's
// judged time: step 1 stands, step 2 reads no data in every part, naming the
// shard, and the sweep stops there, never a pass on the other shards' load.
func TestALostShardMakesItsStepNoData(t *testing.T) {
	if testing.Short() {
		t.Skip("a wall-clock run")
	}
	cfg := shortRun(t, config.Scale(40))
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Shards = []int{4, 8, 12}, 4, 4
	// a warm-up the lanes prime in on a busy host (the longest took 37 s
	// at load 20); the shard dies 1 s (wall) into step 2's judged time
	cfg.Sweep.WarmupS, cfg.Sweep.StepS, cfg.Sweep.MaxStepS, cfg.Workload.PrimeTimeoutS = 120, 180, 180, 120
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	watch := &stepWatch{mark: "step 2: 8 sessions, warm-up", reached: make(chan struct{})}
	var wg sync.WaitGroup
	start := func(ctx context.Context, url string, k int) (func() error, error) {
		ctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		wg.Add(1)
		go func() { defer wg.Done(); errc <- RunShard(ctx, url, k, io.Discard) }()
		if k == 2 {
			go func() { // the shard's process dies
				<-watch.reached
				time.Sleep(time.Duration(120/cfg.TimeScale.Wall()*float64(time.Second)) + time.Second)
				cancel()
			}()
		}
		return func() error { cancel(); return <-errc }, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sum, err := Run(ctx, Options{Config: cfg, Progress: watch, StartShard: start})
	wg.Wait()
	var lost *shard.Lost
	if !errors.As(err, &lost) || lost.Shard != 2 {
		t.Fatalf("run ended with %v, want shard 2 lost\n%s", err, watch.log.String())
	}
	if len(sum.Steps) != 2 {
		t.Fatalf("%d steps, want step 1 and the step that lost the shard", len(sum.Steps))
	}
	if v := sum.Steps[1].Verdict; v != "no_data" {
		t.Errorf("step 2 reads %s, want no data", v)
	}
	for _, p := range sum.Steps[1].Parts {
		if p.Verdict != "no_data" {
			t.Errorf("step 2's %s reads %s", p.Name, p.Verdict)
		}
	}
	if sum.Steps[0].Verdict == "no_data" {
		t.Errorf("step 1, before the loss, reads no data")
	}
}
