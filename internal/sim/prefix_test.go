package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSeededPrefixLookupMatchesMap checks prefixHits started from an earlier
// turn's blocks (request.seed) against the lookup it replaces, the hash map
// asked block by block: over conversations that grow, branch and get evicted
// from a small pool, and seeds that are right, stale, from another
// conversation, unfinished or from another engine life, the hits and the
// chain of blocks must be the same.
func TestSeededPrefixLookupMatchesMap(t *testing.T) {
	p := tinyProfile()
	p.KVCapacityTokens = 64 * p.BlockSize // a small pool: eviction all the time
	p.MaxModelLen = 32 * p.BlockSize
	s, err := New(Options{Profile: p, Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	l := s.life.Load()
	other := s.newLife(p)
	e := newEngine(s, l)
	rng := rand.New(rand.NewPCG(1, 2))
	const convs = 6
	last := make([]*request, convs) // each conversation's latest turn
	hashes := make([][]uint64, convs)
	var running []*request
	seeded, compared := 0, 0
	for step := range 3000 {
		c := rng.IntN(convs)
		// The next turn extends the conversation, sometimes rewriting its tail.
		h := slices.Clone(hashes[c])
		if n := len(h); n > 0 && rng.IntN(5) == 0 {
			h = h[:rng.IntN(n)]
		}
		for range 1 + rng.IntN(4) {
			h = append(h, rng.Uint64())
		}
		if len(h) > 24 {
			h = h[len(h)-24:] // a new conversation now and then
			h[0] = rng.Uint64()
		}
		hashes[c] = h
		r := &request{id: uint64(step), prompt: len(h)*p.BlockSize + 1, maxTokens: 1, hashes: h, life: l, seed: last[c]}
		switch rng.IntN(6) {
		case 0:
			r.seed = last[rng.IntN(convs)] // another conversation's blocks
		case 1:
			if r.seed != nil {
				// The same blocks, held in another engine life.
				r.seed = &request{life: other, done: r.seed.done, chain: slices.Clone(r.seed.chain)}
			}
		}
		if r.seed != nil && r.seed.done && r.seed.life == l {
			seeded++
		}
		plain := &request{hashes: h, life: l}
		want := e.prefixHits(plain, len(h))
		got := e.prefixHits(r, len(h))
		compared++
		if got != want || !slices.Equal(r.chain, plain.chain) {
			t.Fatalf("step %d: seeded lookup found %d blocks %v, the map %d blocks %v", step, got, r.chain, want, plain.chain)
		}
		// Admit it as the engine does (when the blocks are there), register
		// its prompt, and finish some of the running requests.
		need := len(h) + 1 - got
		taken := 0
		for _, b := range r.chain {
			if e.kv.evictable(b) {
				taken++
			}
		}
		if need > e.kv.available()-taken {
			for _, o := range running {
				e.finish(o)
			}
			running = running[:0]
			continue
		}
		for _, b := range r.chain {
			e.kv.touch(b)
			r.blocks = append(r.blocks, b)
		}
		r.chain = r.chain[:0]
		r.registered = got
		for range need {
			r.blocks = append(r.blocks, e.kv.alloc())
		}
		for ; r.registered < len(h); r.registered++ {
			e.kv.register(r.blocks[r.registered], h[r.registered])
		}
		r.computed = r.prompt
		last[c] = r
		running = append(running, r)
		if rng.IntN(3) == 0 || len(running) > 3 {
			i := rng.IntN(len(running))
			e.finish(running[i])
			running = slices.Delete(running, i, i+1)
		}
	}
	if seeded < compared/3 {
		t.Fatalf("only %d of %d lookups had a usable seed: the test does not exercise it", seeded, compared)
	}
}
