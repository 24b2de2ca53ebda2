package sweep

import (
	"sync"

	"github.com/headroom-bench/headroom/internal/load"
)

// Book keeps every record of the run in memory, in arrival order, so each
// step can be judged from its own records. It is the load generator's sink.
type Book struct {
	mu      sync.Mutex
	recs    []load.Record
	pending map[pendingKey]load.Record
	next    func(load.Record)
}

// pendingKey names one request in flight: each try of a turn is a request
// of its own, even when two are stamped at the same modelled instant.
type pendingKey struct {
	lane, play, turn, attempt int
	agent                     string
	send                      float64
}

func keyOf(r load.Record) pendingKey {
	return pendingKey{lane: r.Lane, play: r.Play, turn: r.Turn, attempt: r.Attempt, agent: r.Agent, send: r.Send}
}

// reseeder is a Load that can draw fresh plays for a repeat
// (load.Generator.Reseed).
type reseeder interface{ Reseed(epoch int) }

// descentEpoch is where the epochs of the steps a sweep takes down from a
// step that missed begin (descentEpoch+1, +2, ...): apart from the repeats'
// epoch 1 and the settle step's 2.
const descentEpoch = 10

// reseed makes the lanes l starts from now on draw fresh plays, when it can:
// a repeated step must not replay the traces, start points and markers of
// the step whose windows it pools with.
func reseed(l Load, epoch int) {
	if r, ok := l.(reseeder); ok {
		r.Reseed(epoch)
	}
}

// Sent is the load generator's OnSend: a request went out and its outcome is
// not in yet. It counts as sent in its step until its record arrives.
func (b *Book) Sent(r load.Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending = map[pendingKey]load.Record{}
	}
	r.Pending = true
	b.pending[keyOf(r)] = r
}

// NewBook returns a book that also passes each record to next (may be nil),
// e.g. to write records.jsonl as the run goes.
func NewBook(next func(load.Record)) *Book { return &Book{next: next} }

// Add is the load generator's sink.
func (b *Book) Add(r load.Record) {
	b.mu.Lock()
	delete(b.pending, keyOf(r))
	b.recs = append(b.recs, r)
	if b.next != nil {
		b.next(r)
	}
	b.mu.Unlock()
}

// Step returns the records of step i sent in phase, with the requests still
// in flight marked Pending.
func (b *Book) Step(i int, phase string) []load.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []load.Record
	for _, r := range b.recs {
		if r.Step == i && r.Phase == phase {
			out = append(out, r)
		}
	}
	for _, r := range b.pending {
		if r.Step == i && r.Phase == phase {
			out = append(out, r)
		}
	}
	return out
}

// All returns a copy of every record.
func (b *Book) All() []load.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]load.Record(nil), b.recs...)
}
