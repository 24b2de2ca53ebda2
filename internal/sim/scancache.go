package sim

import (
	"bytes"
	"container/list"
	"sort"
	"sync"
	"sync/atomic"
)

// An agent's next turn sends its whole conversation again, a little longer:
// the body of turn n+1 starts with the bytes of turn n's prompt. Scanning
// every body whole made the simulator's prompt scan the largest cost of a
// simulated run. A scanCache keeps the scans of recent bodies, and a body
// that shares its start with one of them is compared with it (a memory
// compare, far cheaper than hashing) and scanned only from the last block
// boundary inside what they share. The result is the same scan to the last
// bit (TestScanCacheMatchesFullScan): a block boundary inside a content
// string leaves nothing pending but the chain's hash and the word count,
// and both come from the bytes before it.
type scanCache struct {
	mu      sync.Mutex
	budget  int // bytes of bodies and scans held at most
	held    int
	lru     list.List // of *scanEntry, least recently used first
	buckets map[uint64][]*scanEntry
	tick    uint64 // puts and hits so far, to order entries by use
	// skipped counts the body bytes that resumed scans did not scan again.
	skipped int64
}

// scanCacheBytes is the memory one engine's scan cache may hold: enough for
// the latest turn of every session of a typical step (a heavy turn is about
// 1 MB), bounded so a fleet of many copies stays within a small machine.
const scanCacheBytes = 32 << 20

// Bodies shorter than minCachedBody are scanned whole, not cached; the
// first keyBytes of a body pick its bucket; a bucket keeps bucketSize
// bodies (a session's main conversation and its subagents share a start).
const (
	minCachedBody = 4 << 10
	keyBytes      = 256
	bucketSize    = 4
)

// scanEntry is one scanned body. Nothing in it changes once it is cached:
// body is the request's buffer, which is only read after its scan.
type scanEntry struct {
	key       uint64
	blockSize int
	body      []byte
	at, ends  []int // body offsets of each message's content and its end (-1, -1: none)
	roles     []string
	hashes    []uint64
	cps       []checkpoint
	size      int
	used      uint64 // when it was cached or last resumed from, in puts and hits
	el        *list.Element
	// req is the request made from this body, stored once it is built: the
	// next turn's request looks up its prefix along the KV blocks this one
	// held (see engine.prefixHits).
	req atomic.Pointer[request]
}

func newScanCache(budget int) *scanCache {
	return &scanCache{budget: budget, buckets: map[uint64][]*scanEntry{}}
}

// fastChat is the package's fastChat, resuming from the cached scan that
// shares the longest start with buf, and caching buf's scan.
func (c *scanCache) fastChat(buf []byte, blockSize int) (chatRequest, *promptScan, bool) {
	body, at, ok := fastRequest(buf)
	if !ok {
		return body, nil, false
	}
	scan := newPromptScan(blockSize, len(buf))
	if c == nil || len(buf) < minCachedBody {
		return body, scan, scan.addMessages(body.Messages, at, 0, -1)
	}
	scan.track = true
	key := bodyKey(buf)
	ends := make([]int, len(at))
	for i, m := range body.Messages {
		ends[i] = at[i] + len(m.Content)
	}
	from, resume := 0, -1
	e, shared := c.closest(key, blockSize, buf)
	if e != nil {
		if cp, ok := e.resumeAt(shared, body.Messages, at, ends); ok {
			// Room for the blocks past the shared ones, at two bytes a word.
			more := (len(buf)-int(e.cps[cp].off))/(2*blockSize) + 1
			scan.hashes = make([]uint64, 0, int(e.cps[cp].block)+1+more)
			scan.cps = make([]checkpoint, 0, cp+1+more/cpEvery+1)
			scan.resume(e.hashes, e.cps, cp)
			from, resume = int(e.cps[cp].msg), int(e.cps[cp].off)
			c.mu.Lock()
			c.skipped += int64(resume)
			c.mu.Unlock()
		}
	}
	if !scan.addMessages(body.Messages, at, from, resume) {
		return body, nil, false
	}
	if n := len(scan.cps); cap(scan.cps) > n+n/4+16 {
		scan.cps = append(make([]checkpoint, 0, n), scan.cps...)
	}
	roles := make([]string, len(body.Messages))
	for i, m := range body.Messages {
		roles[i] = m.Role
	}
	var old *scanEntry // the earlier turn this body extends, which it replaces
	if e != nil && shared >= len(e.body)-keyBytes {
		old = e
	}
	entry := &scanEntry{key: key, blockSize: blockSize, body: buf, at: at, ends: ends, roles: roles, hashes: scan.hashes, cps: scan.cps,
		size: len(buf) + 8*cap(scan.hashes) + 12*cap(scan.cps) + 16*len(at)}
	c.put(entry, old)
	scan.track, scan.cps = false, nil
	scan.prev, scan.entry = e, entry
	return body, scan, true
}

// bodyKey hashes a body's first keyBytes (FNV-1a).
func bodyKey(buf []byte) uint64 {
	h := uint64(fnvOffset)
	for _, b := range buf[:min(len(buf), keyBytes)] {
		h = (h ^ uint64(b)) * fnvPrime
	}
	return h
}

// closest returns the cached body in key's bucket (scanned with blockSize)
// that shares the longest start with buf, and how many bytes they share.
func (c *scanCache) closest(key uint64, blockSize int, buf []byte) (*scanEntry, int) {
	c.mu.Lock()
	var cands [bucketSize]*scanEntry
	n := copy(cands[:], c.buckets[key])
	c.mu.Unlock()
	var best *scanEntry
	shared := 0
	for _, e := range cands[:n] { // entries never change: compared unlocked
		if e.blockSize != blockSize {
			continue
		}
		if k := commonPrefix(buf, e.body); k > shared {
			best, shared = e, k
		}
	}
	if best != nil {
		c.mu.Lock()
		c.tick++
		best.used = c.tick
		if best.el != nil {
			c.lru.MoveToBack(best.el)
		}
		c.mu.Unlock()
	}
	return best, shared
}

// commonPrefix is how many leading bytes a and b share, compared a page at
// a time by bytes.Equal (a vectorised memory compare).
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for step := 4096; i+step <= n && bytes.Equal(a[i:i+step], b[i:i+step]); i += step {
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// resumeSlack keeps a resume point this far inside the shared bytes: the
// scan of a character may look at the next one (a \u escape's low
// surrogate), never further.
const resumeSlack = 16

// resumeAt picks the last checkpoint of e that a body sharing its first
// shared bytes, with messages msgs whose contents span at..ends, can resume
// from: inside the shared bytes, the same messages (roles and spans) before
// it, and the same role and start for the message it is in, whose content
// is a string.
func (e *scanEntry) resumeAt(shared int, msgs []chatMessage, at, ends []int) (int, bool) {
	limit := shared - resumeSlack
	cp := sort.Search(len(e.cps), func(i int) bool { return int(e.cps[i].off) > limit }) - 1
	if cp < 0 {
		return 0, false
	}
	m := int(e.cps[cp].msg)
	if m >= len(msgs) || len(msgs[m].Content) == 0 || msgs[m].Content[0] != '"' {
		return 0, false
	}
	for i := 0; i <= m; i++ {
		if at[i] != e.at[i] || msgs[i].Role != e.roles[i] || (i < m && ends[i] != e.ends[i]) {
			return 0, false
		}
	}
	return cp, true
}

// put caches e in place of old (the same conversation's earlier turn,
// which e's body extends; nil for none), dropping the bucket's least
// recently used body if the bucket is full, then the least recently used
// bodies of all while the cache holds more than its budget.
func (c *scanCache) put(e, old *scanEntry) {
	if e.size > c.budget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old != nil && old.el != nil {
		c.drop(old)
	}
	if b := c.buckets[e.key]; len(b) >= bucketSize {
		oldest := b[0]
		for _, o := range b {
			if o.used < oldest.used {
				oldest = o
			}
		}
		c.drop(oldest)
	}
	c.tick++
	e.used = c.tick
	e.el = c.lru.PushBack(e)
	c.buckets[e.key] = append(c.buckets[e.key], e)
	c.held += e.size
	for c.held > c.budget {
		c.drop(c.lru.Front().Value.(*scanEntry))
	}
}

// drop removes e from the cache (under mu).
func (c *scanCache) drop(e *scanEntry) {
	c.held -= e.size
	c.lru.Remove(e.el)
	e.el = nil
	b := c.buckets[e.key]
	for i, o := range b {
		if o == e {
			b = append(b[:i:i], b[i+1:]...)
			break
		}
	}
	if len(b) == 0 {
		delete(c.buckets, e.key)
	} else {
		c.buckets[e.key] = b
	}
}
