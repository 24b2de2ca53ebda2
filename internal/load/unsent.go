package load

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A conversation that ends on a failure leaves turns it never sent; they
// count as errors (ErrUnsent), but only as many as its lane would have sent
// in the rest of the time it was judged in, each stamped when it would have
// gone out. The pace is the lane's observed mean interval between the turns
// it started under the same tag (step and phase), and when it has started
// fewer than two, the trace's own: its span over its turns' count. A
// conversation's remaining turns are then due at the failure plus one, two,
// three... paces, in the trace's order. Each is recorded once the clock
// reaches it; when the tag changes (the judged time ends, or the kill switch
// ends it) the ones due by then are recorded and the rest dropped: they fall
// outside the time they would have been judged in. So a window's planned
// turns hold what the lanes would have sent in it, never a spike of zeros at
// the failure, and a failed conversation weighs no more than the time it
// lost.

// unsentPace is the pace of a lane's unsent turns when neither the lane nor
// the trace shows one (a trace without start times, say).
const unsentPace = time.Second

// ghost is the rest of a conversation that ended on a failure: the turns it
// would still have sent, due one pace apart.
type ghost struct {
	l     *lane
	s     Session
	play  int
	tag   Tag
	turns []int // indices into s.Turns, in the order they would have gone out
	why   string
	at    time.Duration // when turns[0] would have gone out
	pace  time.Duration
}

// ghosts holds the conversations whose unsent turns are not all due yet.
type ghosts struct {
	mu sync.Mutex
	q  []*ghost
	// due is the earliest time one of them is due, so a lane about to send
	// looks at the queue only when something is; math.MaxInt64 when empty.
	due atomic.Int64
}

// pace is how a lane has been sending under one tag: the first and latest
// start of a turn's first try and how many there were.
type pace struct {
	mu          sync.Mutex
	tag         Tag
	n           int
	first, last time.Duration
}

// observe notes a turn's first try going out at at under tag.
func (p *pace) observe(tag Tag, at time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 || p.tag != tag {
		p.tag, p.n, p.first = tag, 0, at
	}
	p.n++
	p.last = at
}

// interval is the mean time between the turns started under tag, or 0 when
// fewer than two were.
func (p *pace) interval(tag Tag) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tag != tag || p.n < 2 || p.last <= p.first {
		return 0
	}
	return (p.last - p.first) / time.Duration(p.n-1)
}

// tracePace is the session's own mean interval between turn starts.
func tracePace(s Session) time.Duration {
	if len(s.Turns) < 2 {
		return 0
	}
	lo, hi := s.Turns[0].Start, s.Turns[0].Start
	for _, t := range s.Turns {
		lo, hi = min(lo, t.Start), max(hi, t.Start)
	}
	return time.Duration((hi - lo) / float64(len(s.Turns)-1) * float64(time.Second))
}

// abandon records the turns a conversation will never send because failed
// ended it: turns are indices into s.Turns.
func (g *Generator) abandon(l *lane, s Session, play int, turns []int, failed Record) {
	if len(turns) == 0 {
		return
	}
	tag := Tag{Step: failed.Step, Sessions: failed.Sessions, Phase: failed.Phase}
	every := l.pace.interval(tag)
	if every <= 0 {
		every = tracePace(s)
	}
	if every <= 0 {
		every = unsentPace
	}
	why := fmt.Sprintf("turn %d of this conversation failed (%s)", failed.Turn, failed.Error)
	if failed.Attempt > 0 {
		why = fmt.Sprintf("turn %d of this conversation failed its %d tries (%s)", failed.Turn, failed.Attempt+1, failed.Error)
	}
	turns = slices.Clone(turns)
	slices.SortStableFunc(turns, func(a, b int) int { return cmp.Compare(s.Turns[a].Start, s.Turns[b].Start) })
	now := g.o.Clock.Now()
	g.ghosts.mu.Lock()
	defer g.ghosts.mu.Unlock()
	if *g.tag.Load() != tag {
		return // the failure came after its time was over: none would count
	}
	g.ghosts.q = append(g.ghosts.q, &ghost{l: l, s: s, play: play, tag: tag, turns: turns, why: why, at: now + every, pace: every})
	g.ghosts.due.Store(min(g.ghosts.due.Load(), int64(now+every)))
}

// emitDue records the unsent turns due by now.
func (g *Generator) emitDue() {
	now := g.o.Clock.Now()
	if int64(now) < g.ghosts.due.Load() {
		return
	}
	g.ghosts.mu.Lock()
	defer g.ghosts.mu.Unlock()
	g.emitLocked(now, false)
}

// emitLocked records the unsent turns due by now and forgets the
// conversations with none left; with drop, it forgets them all. The caller
// holds g.ghosts.mu.
func (g *Generator) emitLocked(now time.Duration, drop bool) {
	keep := g.ghosts.q[:0]
	due := time.Duration(math.MaxInt64)
	for _, h := range g.ghosts.q {
		for len(h.turns) > 0 && h.at <= now {
			g.o.Sink(h.record(h.turns[0]))
			h.turns, h.at = h.turns[1:], h.at+h.pace
		}
		// a stopped lane would have sent no more
		if len(h.turns) > 0 && !drop && !h.l.stop.Load() {
			keep = append(keep, h)
			due = min(due, h.at)
		}
	}
	clear(g.ghosts.q[len(keep):])
	g.ghosts.q = keep
	g.ghosts.due.Store(int64(due))
}

// retag records the unsent turns due by now and, when the tag changes,
// drops the rest before t labels what is sent next.
func (g *Generator) retag(t Tag) {
	g.ghosts.mu.Lock()
	defer g.ghosts.mu.Unlock()
	changed := *g.tag.Load() != t
	if len(g.ghosts.q) > 0 {
		g.emitLocked(g.o.Clock.Now(), changed)
	}
	g.tag.Store(&t)
}

// record is unsent turn i of the conversation, due now.
func (h *ghost) record(i int) Record {
	t := h.s.Turns[i]
	return Record{
		V: RecordVersion, Step: h.tag.Step, Sessions: h.tag.Sessions, Phase: h.tag.Phase,
		Lane: h.l.id, Session: h.s.ID, Tier: h.s.Tier, Play: h.play, Turn: t.Index, Agent: t.Agent,
		PlannedPromptTokens: t.In, MaxTokens: max(t.Out, 1), Send: h.at.Seconds(),
		Error: ErrUnsent, Detail: h.why,
	}
}
