package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// refPool is the block pool written plainly: a map for the prefix index,
// slices for the free stack and the LRU list, and the index asked at every
// eviction whether it still maps the block's hash to the block. The pool
// must answer as it does through any sequence of the engine's operations.
type refPool struct {
	ref    []int
	hash   []uint64
	hashed []bool
	lru    []int32 // evictable cached blocks, oldest first
	free   []int32 // stack
	byHash map[uint64]int32
	used   int
	host   *hostCache
}

func newRefPool(n int) *refPool {
	p := &refPool{ref: make([]int, n), hash: make([]uint64, n), hashed: make([]bool, n), byHash: map[uint64]int32{}}
	for i := range n {
		p.free = append(p.free, int32(n-1-i))
	}
	return p
}

func (p *refPool) available() int { return len(p.free) + len(p.lru) }

func (p *refPool) alloc() int32 {
	var b int32
	if n := len(p.free); n > 0 {
		b, p.free = p.free[n-1], p.free[:n-1]
	} else {
		b, p.lru = p.lru[0], p.lru[1:]
		if cur, ok := p.byHash[p.hash[b]]; ok && cur == b {
			delete(p.byHash, p.hash[b])
			if p.host != nil {
				p.host.put(p.hash[b])
			}
		}
		p.hashed[b] = false
	}
	p.ref[b] = 1
	p.used++
	return b
}

func (p *refPool) release(b int32) {
	if p.ref[b]--; p.ref[b] > 0 {
		return
	}
	p.used--
	if p.hashed[b] {
		p.lru = append(p.lru, b)
	} else {
		p.free = append(p.free, b)
	}
}

func (p *refPool) touch(b int32) {
	if p.ref[b] == 0 {
		p.lru = slices.DeleteFunc(p.lru, func(x int32) bool { return x == b })
		p.used++
	}
	p.ref[b]++
}

func (p *refPool) register(b int32, h uint64) bool {
	if _, ok := p.byHash[h]; ok {
		return false
	}
	p.byHash[h], p.hash[b], p.hashed[b] = b, h, true
	return true
}

// hostOrder lists a host cache's hashes, least recently used first.
func hostOrder(c *hostCache) []uint64 {
	var out []uint64
	for e := c.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(uint64))
	}
	return out
}

// The pool hands out, evicts, finds and counts blocks as the plain pool does
// through random allocs, releases, registers, lookups and touches, with
// hashes that collide in the index's low bits and a host tier that records
// the evictions' order.
func TestBlockPoolMatchesReference(t *testing.T) {
	const n = 48
	rng := rand.New(rand.NewPCG(7, 11))
	p, q := newBlockPool(n), newRefPool(n)
	p.host, q.host = newHostCache(20), newHostCache(20)
	key := func() uint64 { return uint64(rng.IntN(90))<<20 | uint64(rng.IntN(4)) }
	var held []int32 // one entry per reference the test holds
	evictions := 0
	for step := range 30000 {
		switch op := rng.IntN(10); {
		case op < 3 && q.available() > 0:
			evict := len(q.free) == 0
			got, want := p.alloc(), q.alloc()
			if got != want {
				t.Fatalf("step %d: alloc gave block %d, the plain pool %d", step, got, want)
			}
			if evict {
				evictions++
			}
			held = append(held, got)
		case op < 6 && len(held) > 0:
			i := rng.IntN(len(held))
			b := held[i]
			held = slices.Delete(held, i, i+1)
			p.release(b)
			q.release(b)
		case op < 8 && len(held) > 0:
			// The engine registers only blocks it holds that hold no hash yet.
			b := held[rng.IntN(len(held))]
			if q.hashed[b] {
				continue
			}
			h := key()
			if got, want := p.register(b, h), q.register(b, h); got != want {
				t.Fatalf("step %d: register(%d, %x) = %v, the plain pool %v", step, b, h, got, want)
			}
		default:
			h := key()
			got, ok := p.lookup(h)
			want, wok := q.byHash[h]
			if ok != wok || got != want {
				t.Fatalf("step %d: lookup(%x) = %d, %v; the plain pool %d, %v", step, h, got, ok, want, wok)
			}
			if ok && rng.IntN(2) == 0 {
				if p.evictable(got) != (q.ref[got] == 0) {
					t.Fatalf("step %d: evictable(%d) = %v with ref %d", step, got, p.evictable(got), q.ref[got])
				}
				p.touch(got)
				q.touch(got)
				held = append(held, got)
			}
		}
		if p.available() != q.available() || p.used != q.used || p.usage() != float64(q.used)/n {
			t.Fatalf("step %d: available %d used %d; the plain pool %d, %d", step, p.available(), p.used, q.available(), q.used)
		}
		for range 4 {
			b, h := int32(rng.IntN(n)), key()
			if rng.IntN(2) == 0 {
				h = q.hash[b]
			}
			if got, want := p.holds(b, h), q.hashed[b] && q.hash[b] == h; got != want {
				t.Fatalf("step %d: holds(%d, %x) = %v, want %v", step, b, h, got, want)
			}
			if got, ok := p.lookup(h); q.hashed[b] && q.hash[b] == h && (!ok || got != b) {
				t.Fatalf("step %d: block %d holds %x but lookup finds %d, %v", step, b, h, got, ok)
			}
		}
		if !slices.Equal(hostOrder(p.host), hostOrder(q.host)) {
			t.Fatalf("step %d: host tier %x, the plain pool's %x", step, hostOrder(p.host), hostOrder(q.host))
		}
	}
	if evictions < 1000 || len(q.byHash) == 0 {
		t.Fatalf("only %d evictions (%d hashes cached): the test does not exercise the LRU", evictions, len(q.byHash))
	}
}

// Hashes that share their low 32 bits (a slot's tag) are told apart by the
// whole hash: the index answers as a map does through adds, removes by hash
// and removes by block, with keys that differ only above bit 32.
func TestHashIndexTagCollisions(t *testing.T) {
	const blocks = 40
	x := newHashIndex(blocks)
	ref := map[uint64]int32{}
	byBlock := map[int32]uint64{}
	rng := rand.New(rand.NewPCG(3, 5))
	key := func() uint64 { return uint64(rng.IntN(12))<<32 | uint64(rng.IntN(5)) }
	for step := range 20000 {
		k := key()
		switch rng.IntN(4) {
		case 0, 1:
			if len(ref) >= blocks {
				continue
			}
			b := int32(rng.IntN(blocks))
			if _, used := byBlock[b]; used {
				continue // a block holds one hash at a time
			}
			_, had := ref[k]
			if got := x.add(k, b); got == had {
				t.Fatalf("step %d: add(%x) = %v with the key held %v", step, k, got, had)
			}
			if !had {
				ref[k], byBlock[b] = b, k
			}
		case 2:
			x.remove(k)
			if b, ok := ref[k]; ok {
				delete(ref, k)
				delete(byBlock, b)
			}
		case 3:
			for b, h := range byBlock {
				x.removeBlock(h, b)
				delete(ref, h)
				delete(byBlock, b)
				break
			}
		}
		for rk, rv := range ref {
			if v, ok := x.get(rk); !ok || v != rv {
				t.Fatalf("step %d: get(%x) = %d, %v; want %d", step, rk, v, ok, rv)
			}
		}
		for range 3 {
			q := key()
			v, ok := x.get(q)
			if want, had := ref[q]; ok != had || (ok && v != want) {
				t.Fatalf("step %d: get(%x) = %d, %v; the map %d, %v", step, q, v, ok, want, had)
			}
		}
	}
}
