package sim

import "container/list"

// blockPool is the engine's KV cache: a fixed number of blocks, reference
// counted while requests hold them, with a prefix cache keyed by chained block
// hashes. Blocks that nobody holds stay cached until they are evicted, least
// recently freed first; blocks that never held a full prompt block are reused
// before any cached block is evicted. Only the engine goroutine touches it.
//
// A block's state (count, hash, LRU links) is one record, so the work on a
// block (a prefix check, a touch, a release, an eviction) reads one cache
// line, not one in each of five arrays.
type blockPool struct {
	blk []blockState

	// LRU list of cached blocks with ref == 0 (evictable), oldest at head.
	head, tail int32
	lruLen     int

	free   []int32 // stack of uncached blocks with ref == 0
	byHash hashIndex
	used   int        // blocks with ref > 0
	pinned []int32    // blocks held out of use by the KV-shrink fault
	host   *hostCache // where evicted prefix blocks go; nil without a host tier
}

// blockState is one block. A block is hashed exactly while byHash maps its
// hash to it: register sets both, eviction (alloc) drops both, and nothing
// else changes either.
type blockState struct {
	hash       uint64
	ref        int32
	prev, next int32 // LRU links while evictable
	hashed     bool
}

func newBlockPool(n int) *blockPool {
	p := &blockPool{
		blk:    make([]blockState, n),
		head:   -1,
		tail:   -1,
		free:   make([]int32, n),
		byHash: newHashIndex(n),
	}
	for i := range p.free {
		p.free[i] = int32(n - 1 - i)
	}
	return p
}

func (p *blockPool) total() int { return len(p.blk) }

// available is how many blocks can be handed out now (free plus evictable).
func (p *blockPool) available() int { return len(p.free) + p.lruLen }

// usage is the fraction of blocks held by requests, like vLLM's kv_cache_usage_perc.
func (p *blockPool) usage() float64 { return float64(p.used) / float64(len(p.blk)) }

// lookup returns the cached block holding hash h, if any.
func (p *blockPool) lookup(h uint64) (int32, bool) { return p.byHash.get(h) }

// holds reports whether block b caches hash h, which is lookup(h) finding b
// (see blockState) read from b alone.
func (p *blockPool) holds(b int32, h uint64) bool {
	s := &p.blk[b]
	return s.hashed && s.hash == h
}

// evictable reports whether b is cached and not held (taking it costs one of
// the available blocks).
func (p *blockPool) evictable(b int32) bool { return p.blk[b].ref == 0 }

// touch takes a reference on a cached block found by lookup.
func (p *blockPool) touch(b int32) {
	s := &p.blk[b]
	if s.ref == 0 {
		p.lruRemove(b)
		p.used++
	}
	s.ref++
}

// alloc hands out a block with no cached content, evicting the least recently
// freed cached block when no uncached block is free. The caller checks
// available first.
func (p *blockPool) alloc() int32 {
	var b int32
	if n := len(p.free); n > 0 {
		b = p.free[n-1]
		p.free = p.free[:n-1]
	} else {
		// Only hashed blocks are on the LRU list, and a hashed block is the
		// one byHash maps its hash to (blockState): drop the entry unasked.
		b = p.head
		p.lruRemove(b)
		s := &p.blk[b]
		p.byHash.removeBlock(s.hash, b)
		if p.host != nil {
			p.host.put(s.hash)
		}
		s.hashed = false
	}
	p.blk[b].ref = 1
	p.used++
	return b
}

// release drops a reference; an unheld cached block becomes evictable.
func (p *blockPool) release(b int32) {
	s := &p.blk[b]
	s.ref--
	if s.ref > 0 {
		return
	}
	p.used--
	if s.hashed {
		p.lruPush(b)
	} else {
		p.free = append(p.free, b)
	}
}

// register records that block b, held and not yet hashed, now holds the
// prompt block with hash h. It returns false when another block already
// caches h (the duplicate stays uncached, as in vLLM).
func (p *blockPool) register(b int32, h uint64) bool {
	if !p.byHash.add(h, b) {
		return false
	}
	s := &p.blk[b]
	s.hash = h
	s.hashed = true
	return true
}

func (p *blockPool) lruPush(b int32) {
	s := &p.blk[b]
	s.prev = p.tail
	s.next = -1
	if p.tail >= 0 {
		p.blk[p.tail].next = b
	} else {
		p.head = b
	}
	p.tail = b
	p.lruLen++
}

func (p *blockPool) lruRemove(b int32) {
	s := &p.blk[b]
	if s.prev >= 0 {
		p.blk[s.prev].next = s.next
	} else {
		p.head = s.next
	}
	if s.next >= 0 {
		p.blk[s.next].prev = s.prev
	} else {
		p.tail = s.prev
	}
	p.lruLen--
}

// hashIndex maps cached block hashes to blocks: an open-addressed table
// with linear probing, sized once for every block of the pool holding a
// hash, so a lookup is one cache line where a Go map of the same size
// missed the cache several times (the prefix lookup of every prompt block
// of every request was the engine's largest cost). Block hashes are already
// well mixed, so their low bits pick the slot. A slot holds its block plus
// one (zero is empty, so a new table's memory stays untouched until used)
// and only the hash's low 32 bits, which hold its home slot: 8 bytes a
// slot, so the table is half the size it was with the whole hash, which
// keeps more of it in the cache; the whole hash is in keys, by block, read
// only when the low bits match.
type hashIndex struct {
	slots []hashSlot
	keys  []uint64 // the hash each block in the table holds
	mask  uint64
}

type hashSlot struct {
	tag uint32 // the hash's low 32 bits
	val int32  // block + 1; 0 is empty
}

func newHashIndex(blocks int) hashIndex {
	n := 8
	for n < 2*blocks {
		n <<= 1
	}
	if uint64(n-1) > 1<<32-1 {
		panic("sim: a KV pool of more than 2^31 blocks") // a tag holds the home slot
	}
	return hashIndex{slots: make([]hashSlot, n), keys: make([]uint64, blocks), mask: uint64(n - 1)}
}

// get returns the block holding h.
func (x *hashIndex) get(h uint64) (int32, bool) {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		s := x.slots[i]
		if s.val == 0 {
			return 0, false
		}
		if s.tag == uint32(h) && x.keys[s.val-1] == h {
			return s.val - 1, true
		}
	}
}

// add maps h to b unless h is already held; it reports whether it added.
func (x *hashIndex) add(h uint64, b int32) bool {
	i := h & x.mask
	for ; x.slots[i].val != 0; i = (i + 1) & x.mask {
		if s := x.slots[i]; s.tag == uint32(h) && x.keys[s.val-1] == h {
			return false
		}
	}
	if int(b) >= len(x.keys) {
		x.keys = append(x.keys, make([]uint64, int(b)+1-len(x.keys))...)
	}
	x.keys[b] = h
	x.slots[i] = hashSlot{uint32(h), b + 1}
	return true
}

// remove drops h.
func (x *hashIndex) remove(h uint64) {
	if b, ok := x.get(h); ok {
		x.removeBlock(h, b)
	}
}

// removeBlock drops h, which maps to b, moving later entries of its probe
// run back into the gap so that no lookup stops early (no tombstones). The
// entry is the one holding b, so no hash is compared.
func (x *hashIndex) removeBlock(h uint64, b int32) {
	i := h & x.mask
	for ; x.slots[i].val != b+1; i = (i + 1) & x.mask {
		if x.slots[i].val == 0 {
			return
		}
	}
	for j := (i + 1) & x.mask; x.slots[j].val != 0; j = (j + 1) & x.mask {
		// The entry at j may fill the gap at i when its home slot is not
		// in the cyclic range (i, j].
		if home := uint64(x.slots[j].tag) & x.mask; (j-home)&x.mask >= (j-i)&x.mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = hashSlot{}
}

// hostCache is the host-memory tier (HiCache-like): the hashes of prefix
// blocks evicted from the GPU cache, least recently used out first when it
// is full. Only the engine goroutine touches it.
type hostCache struct {
	capacity int // blocks
	order    *list.List
	byHash   map[uint64]*list.Element
}

func newHostCache(blocks int) *hostCache {
	return &hostCache{capacity: blocks, order: list.New(), byHash: map[uint64]*list.Element{}}
}

// put keeps h as the most recently used block, dropping the least recently
// used one when full.
func (c *hostCache) put(h uint64) {
	if e, ok := c.byHash[h]; ok {
		c.order.MoveToBack(e)
		return
	}
	if c.order.Len() >= c.capacity {
		old := c.order.Front()
		delete(c.byHash, old.Value.(uint64))
		c.order.Remove(old)
	}
	c.byHash[h] = c.order.PushBack(h)
}

// hit reports whether h is held, marking it recently used.
func (c *hostCache) hit(h uint64) bool {
	e, ok := c.byHash[h]
	if ok {
		c.order.MoveToBack(e)
	}
	return ok
}
