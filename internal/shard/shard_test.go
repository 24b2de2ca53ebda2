package shard

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// fakeLanes stands for a shard's generator: it remembers its orders and,
// on each tag, sends one record through its worker.
type fakeLanes struct {
	mu       sync.Mutex
	sessions int
	tag      load.Tag
	epoch    int
	stopped  bool
	inFlight int
	emit     func(load.Record)
}

func (f *fakeLanes) SetSessions(n int) { f.mu.Lock(); f.sessions = n; f.mu.Unlock() }
func (f *fakeLanes) SetTag(t load.Tag) {
	f.mu.Lock()
	f.tag = t
	emit := f.emit
	f.mu.Unlock()
	if emit != nil {
		emit(load.Record{Step: t.Step, Phase: t.Phase, Lane: 100})
	}
}
func (f *fakeLanes) InFlight() int                  { f.mu.Lock(); defer f.mu.Unlock(); return f.inFlight }
func (f *fakeLanes) Stop(time.Duration)             { f.mu.Lock(); f.stopped = true; f.mu.Unlock() }
func (f *fakeLanes) Priming() load.Priming          { return load.Priming{Started: 1} }
func (f *fakeLanes) InFlightByTier() map[string]int { return map[string]int{"light": f.InFlight()} }
func (f *fakeLanes) Reseed(e int)                   { f.mu.Lock(); f.epoch = e; f.mu.Unlock() }
func (f *fakeLanes) state() (int, load.Tag, int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions, f.tag, f.epoch, f.stopped
}

type sink struct {
	mu   sync.Mutex
	recs []load.Record
}

func (s *sink) add(r load.Record) { s.mu.Lock(); s.recs = append(s.recs, r); s.mu.Unlock() }
func (s *sink) count(step int, phase string) map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]int{}
	for _, r := range s.recs {
		if r.Step == step && r.Phase == phase {
			out[r.Shard]++
		}
	}
	return out
}

func start(t *testing.T, shards int, stale time.Duration) (*Coordinator, *fakeLanes, *sink) {
	t.Helper()
	clock, _ := timescale.New(1)
	local, got := &fakeLanes{}, &sink{}
	c := NewCoordinator(Options{Local: local, Shards: shards, Clock: clock, Sink: got.add, OnSend: got.add, Poll: 50 * time.Millisecond, Stale: stale, Setup: Setup{TokensPerWord: 1.25}})
	if err := c.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, local, got
}

func worker(c *Coordinator, k int, stale time.Duration) (*Worker, *fakeLanes) {
	lanes := &fakeLanes{inFlight: k}
	w := &Worker{URL: c.URL(), Shard: k, Lanes: lanes, Client: &http.Client{}, Stale: stale}
	lanes.emit = w.Done
	return w, lanes
}

// TestOrdersReachEveryShardBeforeTheyReturn: a change of sessions or tag
// returns only once every shard carries it out and its records of the
// tag before are in, so a step's records end with its judged time; in
// flight and priming add up over the shards; a stop ends every worker.
func TestOrdersReachEveryShardBeforeTheyReturn(t *testing.T) {
	const shards = 4
	c, local, got := start(t, shards, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := FetchSetup(ctx, http.DefaultClient, c.URL(), 10*time.Second)
	if err != nil || s.Shards != shards || s.TokensPerWord != 1.25 {
		t.Fatalf("setup %+v, %v", s, err)
	}
	var lanes []*fakeLanes
	errs := make(chan error, shards)
	for k := 1; k < shards; k++ {
		w, l := worker(c, k, time.Minute)
		lanes = append(lanes, l)
		go func() { errs <- w.Run(ctx) }()
	}
	if err := c.WaitJoined(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c.SetSessions(8)
	for step := range 3 {
		c.SetTag(load.Tag{Step: step, Sessions: 8, Phase: load.PhaseMeasure})
		for k, l := range lanes {
			if n, tag, _, _ := l.state(); n != 8 || tag.Step != step || tag.Phase != load.PhaseMeasure {
				t.Errorf("step %d: shard %d has %d sessions, tag %+v after SetTag returned", step, k+1, n, tag)
			}
		}
		// the records each shard sent on the tag before this one are in
		c.SetTag(load.Tag{Step: step + 1, Sessions: 8, Phase: load.PhaseWarmup})
		counts := got.count(step, load.PhaseMeasure)
		for k := 1; k < shards; k++ {
			if counts[k] != 1 {
				t.Errorf("step %d: %d records of shard %d in when the step ended, want 1", step, counts[k], k)
			}
		}
	}
	if n, _, _, _ := local.state(); n != 8 {
		t.Errorf("the coordinator's own lanes: %d sessions", n)
	}
	c.Reseed(2)
	for k, l := range lanes {
		if _, _, e, _ := l.state(); e != 2 {
			t.Errorf("shard %d epoch %d after Reseed(2)", k+1, e)
		}
	}
	if n := c.InFlight(); n != 1+2+3 {
		t.Errorf("in flight %d, want the shards' 1+2+3", n)
	}
	if pm := c.Priming(); pm.Started != shards {
		t.Errorf("priming started %d, want one per shard", pm.Started)
	}
	c.Stop(time.Second)
	for k := 1; k < shards; k++ {
		if err := <-errs; err != nil {
			t.Errorf("a worker ended with %v", err)
		}
	}
	for k, l := range lanes {
		if _, _, _, stopped := l.state(); !stopped {
			t.Errorf("shard %d's lanes were not stopped", k+1)
		}
	}
	if err := c.Lost(); err != nil {
		t.Errorf("no shard was lost, Lost says %v", err)
	}
}

// TestAShardThatDiesIsLost: a shard that stops syncing mid-run is lost
// within the stale time, named, and its lanes no longer count in flight;
// orders after it do not wait on it; it is not taken back.
func TestAShardThatDiesIsLost(t *testing.T) {
	c, _, _ := start(t, 2, 2*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	w, _ := worker(c, 1, time.Minute)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if err := c.WaitJoined(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c.SetSessions(4)
	if c.Lost() != nil {
		t.Fatal("lost before it died")
	}
	cancel() // the shard's process dies: no more syncs
	<-done
	deadline := time.Now().Add(time.Minute)
	for c.Lost() == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	var lost *Lost
	if err := c.Lost(); !errors.As(err, &lost) || lost.Shard != 1 {
		t.Fatalf("Lost() = %v, want shard 1", err)
	}
	if n := c.InFlight(); n != 0 {
		t.Errorf("a lost shard's requests still count in flight: %d", n)
	}
	c.SetTag(load.Tag{Step: 1, Phase: load.PhaseMeasure}) // returns without it
	w2, _ := worker(c, 1, time.Second)
	if err := w2.Run(context.Background()); !errors.Is(err, ErrRefused) {
		t.Errorf("a lost shard rejoining: %v, want refused", err)
	}
}

// TestWrongShardsAreRefused: a shard number outside the run, or another
// protocol version, is turned away with the reason.
func TestWrongShardsAreRefused(t *testing.T) {
	c, _, _ := start(t, 2, time.Minute)
	w, _ := worker(c, 5, time.Second)
	if err := w.Run(context.Background()); !errors.Is(err, ErrRefused) {
		t.Errorf("shard 5 of 2: %v, want refused", err)
	}
}
