package sim

import "testing"

func TestBlockPool(t *testing.T) {
	p := newBlockPool(4)
	a, b := p.alloc(), p.alloc()
	p.register(a, 100)
	p.register(b, 200)
	if p.available() != 2 || p.usage() != 0.5 {
		t.Fatalf("after two allocs: available %d usage %g", p.available(), p.usage())
	}
	// A second block with an already cached hash stays uncached.
	c := p.alloc()
	if p.register(c, 100) {
		t.Error("a duplicate hash was registered twice")
	}
	p.release(c)
	// Freed cached blocks stay findable; b is freed before a, so b is older.
	p.release(b)
	p.release(a)
	if got, ok := p.lookup(200); !ok || got != b {
		t.Fatalf("freed cached block not found by hash")
	}
	if p.available() != 4 || p.used != 0 {
		t.Fatalf("all free: available %d used %d", p.available(), p.used)
	}
	// Uncached blocks are handed out before any cached block is evicted.
	x, y := p.alloc(), p.alloc()
	if x == a || x == b || y == a || y == b {
		t.Error("a cached block was evicted while uncached blocks were free")
	}
	// Then the least recently freed cached block (b) goes first.
	if z := p.alloc(); z != b {
		t.Errorf("evicted block %d, want the older cached block %d", z, b)
	}
	if _, ok := p.lookup(200); ok {
		t.Error("an evicted block is still found by its hash")
	}
	// Touching the remaining cached block takes it out of the evictable set.
	p.touch(a)
	if p.available() != 0 || p.usage() != 1 {
		t.Errorf("after touch: available %d usage %g, want 0 and 1", p.available(), p.usage())
	}
}

// The block index answers as a Go map does through any order of adds and
// removes, with keys chosen to collide in the table's low bits.
func TestHashIndexMatchesMap(t *testing.T) {
	x := newHashIndex(64)
	ref := map[uint64]int32{}
	state := uint64(1)
	next := func() uint64 { state = mix64(state + 0x9e3779b97f4a7c15); return state }
	for i := range 20000 {
		// A few hundred distinct keys, many sharing their low bits.
		k := next()%300<<20 | next()%8
		switch next() % 3 {
		case 0, 1:
			if len(ref) >= 64 { // the pool never holds more hashes than blocks
				continue
			}
			_, had := ref[k]
			if got := x.add(k, int32(i)); got == had {
				t.Fatalf("add(%x) = %v with the key held %v", k, got, had)
			}
			if !had {
				ref[k] = int32(i)
			}
		case 2:
			x.remove(k)
			delete(ref, k)
		}
		for rk, rv := range ref {
			if v, ok := x.get(rk); !ok || v != rv {
				t.Fatalf("step %d: get(%x) = %d, %v; want %d", i, rk, v, ok, rv)
			}
		}
		if _, ok := x.get(k); ok != (func() bool { _, had := ref[k]; return had })() {
			t.Fatalf("step %d: get(%x) found %v", i, k, ok)
		}
	}
}
