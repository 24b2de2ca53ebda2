package rig

import (
	"sync"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/shard"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// stepCut draws the line between a step's judged time and what comes
// after it, for the requests still in flight when that time ends. A request
// of a step's judged time that finishes after the line is kept out of the
// book, so the step is judged on it as sent and unfinished however late the
// judging runs. The run directory holds it both ways: as it was judged,
// written with the step (inFlight), and with its outcome once it finishes,
// flagged as late, so that `judge` sees the step exactly as the live run
// did, even when the run was killed before the request finished.
type stepCut struct {
	mu    sync.Mutex
	cur   load.Tag
	ended map[int]bool // steps whose judged time is over
	book  *sweep.Book
	late  func(load.Record) // writes a record that finished after its step's line
}

// inFlight is what step i was judged on as still in flight: the requests
// of its judged time sent and not finished by its line, as they were sent.
func (c *stepCut) inFlight(i int) []load.Record {
	var out []load.Record
	for _, r := range c.book.Step(i, load.PhaseMeasure) {
		if r.Pending {
			out = append(out, r)
		}
	}
	return out
}

func newStepCut(book *sweep.Book, late func(load.Record)) *stepCut {
	return &stepCut{book: book, late: late, ended: map[int]bool{}}
}

// add is the load generator's sink.
func (c *stepCut) add(r load.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Phase == load.PhaseMeasure && c.ended[r.Step] {
		c.late(r)
		return
	}
	// under c.mu, so the record is in the book before the sweep can see
	// the step's judged time end, or it is late
	c.book.Add(r)
}

// setTag is told each tag the sweep sets; leaving a step's judged time
// draws that step's line.
func (c *stepCut) setTag(t load.Tag) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur.Phase == load.PhaseMeasure && (t.Phase != load.PhaseMeasure || t.Step != c.cur.Step) {
		c.ended[c.cur.Step] = true
	}
	c.cur = t
}

// wrap returns l with its SetTag watched by the cut. A load generator's
// every other method, the optional ones the sweep looks for included, is
// its own.
func (c *stepCut) wrap(l sweep.Load) sweep.Load {
	switch v := l.(type) {
	case *load.Generator:
		return cutGenerator{Generator: v, cut: c}
	case *shard.Coordinator:
		return cutShards{Coordinator: v, cut: c}
	}
	return cutLoad{Load: l, cut: c}
}

// cutGenerator is a load generator whose tags the cut watches.
type cutGenerator struct {
	*load.Generator
	cut *stepCut
}

// SetTag tags what is sent next, then draws the line: the generator
// records the unsent turns due by now under the old tag first, and they
// belong to the step that is ending.
func (l cutGenerator) SetTag(t load.Tag) { l.Generator.SetTag(t); l.cut.setTag(t) }

// cutShards is a sharded load whose tags the cut watches: the coordinator
// switches every shard's tag before it returns, so the line falls after
// every shard's records of the step.
type cutShards struct {
	*shard.Coordinator
	cut *stepCut
}

func (l cutShards) SetTag(t load.Tag) { l.Coordinator.SetTag(t); l.cut.setTag(t) }

// cutLoad is any other load whose tags the cut watches.
type cutLoad struct {
	sweep.Load
	cut *stepCut
}

func (l cutLoad) SetTag(t load.Tag) { l.Load.SetTag(t); l.cut.setTag(t) }
