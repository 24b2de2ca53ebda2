package load

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// TestAReseedDrawsFreshSessions (issue 21.2): lanes started after
// Reseed(epoch) replay the sessions Options.Fresh gives for that epoch (a
// corpus from a fresh synthesis seed), not the corpus the first run drew
// from; Fresh is asked once per epoch.
func TestAReseedDrawsFreshSessions(t *testing.T) {
	srv := sseServer(t, 2, nil)
	var pool, fresh []Session
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		pool = append(pool, pacedSession(id, 40))
		fresh = append(fresh, pacedSession("fresh-"+id, 40))
	}
	var asked atomic.Int64
	clock, _ := timescale.New(1000)
	col := &collector{}
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": pool},
		Fresh: func(epoch int) map[string][]Session {
			asked.Add(1)
			return map[string][]Session{"light": fresh}
		},
		Mix: []TierShare{{"light", 1}}, Prompts: prompt.Builder{Seed: 1, BlockSize: 64},
		ThinkTime: ThinkNone, Timeout: time.Hour, Seed: 3, Sink: col.add,
	})
	const lanes = 4
	seen := func(step int) map[int]bool {
		out := map[int]bool{}
		for _, r := range col.all() {
			if r.Step == step && r.Phase == PhaseMeasure {
				out[r.Lane] = true
			}
		}
		return out
	}
	run := func(step int) {
		g.SetTag(Tag{Step: step, Sessions: lanes, Phase: PhaseMeasure})
		g.SetSessions(lanes)
		deadline := time.Now().Add(5 * time.Second)
		for len(seen(step)) < lanes && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		g.SetSessions(0)
		_ = g.wg.Wait(context.Background())
	}
	run(0)
	g.Reseed(1)
	run(1)
	if len(seen(1)) < lanes {
		t.Fatalf("only %d of %d lanes sent in the repeat", len(seen(1)), lanes)
	}
	for _, r := range col.all() {
		if r.Phase != PhaseMeasure {
			continue
		}
		if isFresh := strings.HasPrefix(r.Session, "fresh-"); isFresh != (r.Step == 1) {
			t.Errorf("step %d, lane %d replayed session %q: the first run must draw from Tiers, the repeat from Fresh", r.Step, r.Lane, r.Session)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("Fresh was asked %d times for one epoch, want once", n)
	}
}
