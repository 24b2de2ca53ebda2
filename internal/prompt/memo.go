package prompt

import (
	"container/list"
	"slices"
	"sync"
)

// Memo remembers recent prompts so that a turn whose hash ids start as an
// earlier turn's did (an agent's next turn extends its conversation, and
// every play of a trace replays the same blocks) copies that turn's text
// for the blocks they share and writes only the rest: its own marker, the
// blocks past them, a cut block and filler. The text is byte for byte what
// Append writes without it (a block's words depend only on the seed, the
// trace and the block's id). It is safe for
// concurrent use; give one to every Builder of a run through Builder.Memo.
type Memo struct {
	mu     sync.Mutex
	budget int // bytes of text held at most
	held   int
	tick   uint64
	lru    list.List // of *memoEntry, least recently used first
	byKey  map[memoKey][]*memoEntry
	copied int64 // bytes copied instead of written, for tests and benchmarks
}

// MemoBytes is a Memo budget that holds the latest turn of a few hundred
// sessions (a heavy turn is about 1 MB of text).
const MemoBytes = 128 << 20

// memoKey names the prompts that can share text: the plays of one trace,
// built with one seed and block length (a block's words depend on those
// and its id only; the marker, which differs from play to play, is not
// held).
type memoKey struct {
	trace string
	seed  uint64
	block int // words per block
}

// Prompts of one key kept at most (a session's conversation and its
// subagents' share the key, in every play of it).
const memoPerKey = 8

// memoEntry is one prompt past its marker: its text, its ids, and where
// each full block's words end in the text (ends[0] is 0, the first block's
// start).
type memoEntry struct {
	key  memoKey
	text []byte
	ids  []int64
	ends []int
	used uint64
	el   *list.Element
}

// NewMemo returns a memo that holds at most budget bytes of prompt text.
func NewMemo(budget int) *Memo { return &Memo{budget: budget, byKey: map[memoKey][]*memoEntry{}} }

// build appends to dst the prompt that gen writes, given the text of the
// longest run of leading full blocks (at most full) that a remembered
// prompt of key shares with ids: gen(text, ends, done) appends to text,
// which holds the marker and done blocks whose ends are in ends (relative
// to the first block's start; empty when done is 0), the rest of the prompt,
// and records in ends where its further full blocks end. When the shared
// prompt's full blocks are all shared (the play's next turn), it is
// extended in place and copied to dst once; otherwise the shared text is
// copied to dst, the rest written there, and the prompt remembered.
func (m *Memo) build(dst []byte, key memoKey, ids []int64, full int, gen func(text []byte, ends *[]int, done int) []byte) []byte {
	m.mu.Lock()
	e, k := m.best(key, ids, full)
	if e != nil && k == len(e.ends)-1 {
		m.held -= cap(e.text)
		e.text = gen(e.text[:e.ends[k]], &e.ends, k)
		e.ids = append(e.ids[:k], ids[k:len(e.ends)-1]...)
		m.held += cap(e.text)
		dst = append(dst, e.text...)
		m.overBudget()
		m.mu.Unlock()
		return dst
	}
	var ends []int
	if e != nil {
		dst = append(dst, e.text[:e.ends[k]]...)
		ends = append(ends, e.ends[:k+1]...)
	}
	m.mu.Unlock()
	start := len(dst)
	if len(ends) > 0 {
		start -= ends[len(ends)-1]
	}
	dst = gen(dst, &ends, k)
	if e == nil || k < len(ends)-1 {
		// a prompt whose full blocks e all holds is served by e
		m.keep(key, dst[start:], ids[:len(ends)-1], ends)
	}
	return dst
}

// best is the remembered prompt of key that shares the most leading full
// blocks with ids (at most full), and how many; nil when none shares one.
// It counts as a use. Under mu.
func (m *Memo) best(key memoKey, ids []int64, full int) (*memoEntry, int) {
	var best *memoEntry
	n := 0
	for _, e := range m.byKey[key] {
		k := 0
		for lim := min(full, len(e.ends)-1, len(ids)); k < lim && e.ids[k] == ids[k]; k++ {
		}
		if k > n {
			best, n = e, k
		}
	}
	if best != nil {
		m.tick++
		best.used = m.tick
		m.lru.MoveToBack(best.el)
		m.copied += int64(best.ends[n])
	}
	return best, n
}

// shared is the bytes of the marker and the leading full blocks (at most
// full) that the remembered prompt of key sharing the most of them with
// ids holds, and how many blocks; 0, 0 when none shares one. Unlike best
// it is no use of the prompt.
func (m *Memo) shared(key memoKey, ids []int64, full int) (bytes, blocks int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.byKey[key] {
		k := 0
		for lim := min(full, len(e.ends)-1, len(ids)); k < lim && e.ids[k] == ids[k]; k++ {
		}
		if k > blocks {
			bytes, blocks = e.ends[k], k
		}
	}
	return bytes, blocks
}

// overBudget forgets the least recently used prompts while the memo holds
// more than its budget. Under mu.
func (m *Memo) overBudget() {
	for m.held > m.budget {
		m.drop(m.lru.Front().Value.(*memoEntry))
	}
}

// keep remembers a prompt: text (copied), the ids of its full blocks and
// where they end. A remembered prompt of the same key whose full blocks
// this one starts with is dropped: this one serves all it could.
func (m *Memo) keep(key memoKey, text []byte, ids []int64, ends []int) {
	if len(text) > m.budget {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var reuse *memoEntry
	b := m.byKey[key]
	for i := 0; i < len(b); i++ {
		e := b[i]
		if len(e.ids) <= len(ids) && slices.Equal(e.ids, ids[:len(e.ids)]) {
			m.drop(e)
			reuse = e
			b = m.byKey[key]
			i--
		}
	}
	if len(b) >= memoPerKey {
		oldest := b[0]
		for _, e := range b {
			if e.used < oldest.used {
				oldest = e
			}
		}
		m.drop(oldest)
	}
	e := reuse
	if e == nil {
		e = &memoEntry{}
	}
	e.key = key
	e.text = append(e.text[:0], text...)
	e.ids = append(e.ids[:0], ids...)
	e.ends = append(e.ends[:0], ends...)
	m.tick++
	e.used = m.tick
	e.el = m.lru.PushBack(e)
	m.byKey[key] = append(m.byKey[key], e)
	m.held += cap(e.text)
	m.overBudget()
}

// drop forgets e (under mu).
func (m *Memo) drop(e *memoEntry) {
	m.held -= cap(e.text)
	m.lru.Remove(e.el)
	e.el = nil
	b := m.byKey[e.key]
	for i, o := range b {
		if o == e {
			b = append(b[:i:i], b[i+1:]...)
			break
		}
	}
	if len(b) == 0 {
		delete(m.byKey, e.key)
	} else {
		m.byKey[e.key] = b
	}
}
