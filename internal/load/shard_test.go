package load

import (
	"slices"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// laneIDs is the lane ids and start numbers a generator runs now.
func (g *Generator) laneIDs() (ids []int, starts []uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.lanes {
		ids = append(ids, l.id)
		starts = append(starts, l.start)
	}
	return ids, starts
}

// TestShardsSplitOneProcessesLanes: over a ladder that goes up, down and
// up again, the shards' lanes together are the lane ids one process runs,
// each id on one shard (its tier is tierOf(id), as in one process); a lane's
// first start has the number it has in one process, and no two lane starts
// of any shard share one (it marks their prompts for the cache).
func TestShardsSplitOneProcessesLanes(t *testing.T) {
	srv := sseServer(t, 1, nil)
	clock, _ := timescale.New(1)
	mix := []TierShare{{"heavy", 0.5}, {"light", 0.5}}
	gen := func(shard, shards int) *Generator {
		// no sessions: lanes start and end at once, sending nothing
		return NewGenerator(Options{Client: NewClient(srv.URL, "m"), Clock: clock, Mix: mix,
			Prompts: prompt.Builder{Seed: 1, BlockSize: 64}, ThinkTime: ThinkNone, Timeout: time.Second, Seed: 7, Shard: shard, Shards: shards})
	}
	for _, shards := range []int{2, 3, 4} {
		one := gen(0, 1)
		var parts []*Generator
		for k := range shards {
			parts = append(parts, gen(k, shards))
		}
		seen := map[uint64]bool{}
		for _, n := range []int{3, 7, 2, 9, 1, 12} {
			one.SetSessions(n)
			want, oneStarts := one.laneIDs()
			var got []int
			for k, g := range parts {
				g.SetSessions(n)
				ids, starts := g.laneIDs()
				for i, id := range ids {
					if id%shards != k {
						t.Errorf("%d shards, %d sessions: shard %d runs lane %d", shards, n, k, id)
					}
					seen[starts[i]] = true
				}
				got = append(got, ids...)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%d shards, %d sessions: lanes %v, one process runs %v", shards, n, got, want)
			}
			if n == 3 { // the first start of lanes 0-2
				for i, s := range oneStarts {
					if s != uint64(i+1) {
						t.Errorf("one process: lane %d starts as %d", i, s)
					}
				}
			}
		}
		// every start of every shard got a number of its own
		total := 0
		for _, g := range parts {
			total += int(g.starts.Load())
		}
		if len(seen) != total {
			t.Errorf("%d shards: %d lane starts share %d numbers", shards, total, len(seen))
		}
		for k, g := range parts {
			if s := g.startOf(1); s != uint64(k+1) {
				t.Errorf("shard %d's first lane (id %d) starts as %d, want %d as in one process", k, k, s, k+1)
			}
		}
		one.Stop(time.Second)
		for _, g := range parts {
			g.Stop(time.Second)
		}
	}
}
