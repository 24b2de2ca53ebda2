package prompt

import (
	"container/list"
	"slices"
	"sync"
)

// Memo remembers recent prompts so that a turn whose hash ids start as an
// earlier turn's did (an agent's next turn extends its conversation) copies
// that turn's text for the blocks they share and writes only the rest. The
// text is byte for byte what Append writes without it (a block's words
// depend only on the seed, the trace and the block's id). It is safe for
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

// memoKey names the prompts that can share text: one play of one trace,
// built with one seed and block length.
type memoKey struct {
	trace string
	play  uint64
	seed  uint64
	block int // words per block
}

// Prompts of one key kept at most (a session's conversation and its
// subagents' share the key).
const memoPerKey = 4

// memoEntry is one prompt: its text, its ids, and where each full block's
// words end in the text (ends[0] is the marker's end).
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

// appendShared appends the text of the longest run of leading full blocks
// (at most full) that a remembered prompt of key shares with ids, the
// marker included, and returns how many blocks that is, with ends extended
// by where each block's words end in the appended text (relative to where
// it starts). It appends nothing when no prompt shares a block.
func (m *Memo) appendShared(dst []byte, ends []int, key memoKey, ids []int64, full int) ([]byte, []int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
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
	if best == nil {
		return dst, ends, 0
	}
	m.tick++
	best.used = m.tick
	m.lru.MoveToBack(best.el)
	m.copied += int64(best.ends[n])
	return append(dst, best.text[:best.ends[n]]...), append(ends, best.ends[:n+1]...), n
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
	for m.held > m.budget {
		m.drop(m.lru.Front().Value.(*memoEntry))
	}
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
