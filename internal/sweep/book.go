package sweep

import (
	"sort"
	"sync"

	"github.com/headroom-bench/headroom/internal/load"
)

// Book keeps every record of the run in memory, in arrival order, so each
// step can be judged from its own records. It is the load generator's sink.
type Book struct {
	mu   sync.Mutex
	recs []load.Record
	next func(load.Record)
}

// NewBook returns a book that also passes each record to next (may be nil),
// e.g. to write records.jsonl as the run goes.
func NewBook(next func(load.Record)) *Book { return &Book{next: next} }

// Add is the load generator's sink.
func (b *Book) Add(r load.Record) {
	b.mu.Lock()
	b.recs = append(b.recs, r)
	if b.next != nil {
		b.next(r)
	}
	b.mu.Unlock()
}

// Step returns the records of step i sent in phase.
func (b *Book) Step(i int, phase string) []load.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []load.Record
	for _, r := range b.recs {
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

func sortFloats(xs []float64) { sort.Float64s(xs) }
