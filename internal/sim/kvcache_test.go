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
