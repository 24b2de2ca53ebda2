package load

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/trace"
)

// Session is one agent conversation a lane can replay.
type Session struct {
	ID    string
	Tier  string
	Turns []trace.Turn
}

// Think-time modes.
const (
	ThinkNone     = "none"
	ThinkRecorded = "recorded"
	ThinkCapped   = "capped"
)

// Options configure a Generator.
type Options struct {
	Client *Client
	Clock  *timescale.Clock
	// Tiers holds the sessions of each tier; Mix gives each tier's share of lanes.
	Tiers map[string][]Session
	Mix   []TierShare
	// Prompts builds each turn's text from its hash ids. A turn's own
	// BlockSize (its trace's block_size), when set, replaces Prompts.BlockSize.
	Prompts prompt.Builder
	// ThinkTime is none, recorded or capped; ThinkCap bounds it when capped.
	ThinkTime string
	ThinkCap  time.Duration
	// Timeout is each request's client deadline, in modelled time.
	Timeout time.Duration
	// PrimeTimeout bounds a lane's priming request, in modelled time; 0 means
	// Timeout. A priming request past it is recorded as a timeout and the lane
	// goes on unprimed.
	PrimeTimeout time.Duration
	Seed         uint64
	// Sink receives every record; it is called from many goroutines.
	Sink func(Record)
	// OnSend, if set, receives each request as it goes out (no outcome yet),
	// so a step can count what it sent before the answers are in.
	OnSend func(Record)
}

// TierShare is one tier's share of the lanes.
type TierShare struct {
	Tier  string
	Share float64
}

// Generator runs closed-loop lanes: each lane replays one session turn by
// turn, its subagents as parallel branches, and starts the next play when the
// session ends.
type Generator struct {
	o          Options
	mu         sync.Mutex
	lanes      []*lane
	wg         sync.WaitGroup
	tag        atomic.Pointer[Tag]
	inFlight   atomic.Int64
	tierFlight map[string]*atomic.Int64
	starts     atomic.Uint64
	ctx        context.Context
	cancel     context.CancelFunc

	primeMu sync.Mutex
	priming Priming
}

// Tag is what records sent now are labelled with.
type Tag struct {
	Step     int
	Sessions int
	Phase    string
}

// Priming is how the lanes' warm-up has gone so far. Durations and times are
// modelled.
type Priming struct {
	Started int // lanes that have begun priming, since the generator was made
	Pending int // of them, lanes whose priming request has not ended
	Failed  int // priming requests that failed, those past PrimeTimeout included
	// TimedOut counts the failed ones that ran past PrimeTimeout: the warm-up
	// was too short for them (the others the server turned away).
	TimedOut int
	Last     time.Duration // clock time the latest priming ended; 0 before any
	Longest  time.Duration // the longest one lane's priming took
}

type lane struct {
	id       int
	start    uint64 // unique per lane start, so no two plays of the run share a marker
	tier     string
	stop     atomic.Bool
	inFlight atomic.Int64
	peak     atomic.Int64 // the most requests this lane ever had in flight at once

	// seen holds the prefix chains of every prompt this lane sent in its
	// current play, to tell how much of a prompt an ideal cache would hold.
	seenMu     sync.Mutex
	seenMarker uint64
	seen       map[uint64]struct{}
}

// idealCached returns how many of a prompt's tokens an ideal prefix cache
// would hold: the longest run of leading hash blocks that an earlier prompt of
// the same play already sent (plays never share cache). It then remembers
// this prompt's blocks.
func (l *lane) idealCached(marker uint64, ids []int64, blockSize, tokens int) int {
	l.seenMu.Lock()
	defer l.seenMu.Unlock()
	if l.seen == nil || l.seenMarker != marker {
		l.seen, l.seenMarker = map[uint64]struct{}{}, marker
	}
	chain := uint64(14695981039346656037)
	hit, matching := 0, true
	for i, id := range ids {
		chain = (chain ^ uint64(id)) * 1099511628211
		chain ^= chain >> 29
		if _, ok := l.seen[chain]; ok && matching {
			hit = i + 1
		} else {
			matching = false
			l.seen[chain] = struct{}{}
		}
	}
	return min(hit*blockSize, tokens)
}

// NewGenerator returns a generator with no lanes running.
func NewGenerator(o Options) *Generator {
	ctx, cancel := context.WithCancel(context.Background())
	g := &Generator{o: o, ctx: ctx, cancel: cancel, tierFlight: map[string]*atomic.Int64{}}
	for tier := range o.Tiers {
		g.tierFlight[tier] = new(atomic.Int64)
	}
	for _, m := range o.Mix {
		if g.tierFlight[m.Tier] == nil {
			g.tierFlight[m.Tier] = new(atomic.Int64)
		}
	}
	g.tag.Store(&Tag{Phase: PhaseWarmup})
	return g
}

// SetTag labels the records of requests sent from now on.
func (g *Generator) SetTag(t Tag) { g.tag.Store(&t) }

// InFlight is the number of requests waiting on the server now. With
// subagents a lane can have more than one.
func (g *Generator) InFlight() int { return int(g.inFlight.Load()) }

// InFlightByTier is InFlight split by the tier of the lane that sent them.
func (g *Generator) InFlightByTier() map[string]int {
	out := make(map[string]int, len(g.tierFlight))
	for tier, n := range g.tierFlight {
		out[tier] = int(n.Load())
	}
	return out
}

// Priming reports the lanes' warm-up so far. A sweep checks it when its
// judged time begins: Pending > 0 then means warm-up would eat the step.
func (g *Generator) Priming() Priming {
	g.primeMu.Lock()
	defer g.primeMu.Unlock()
	return g.priming
}

// SetSessions starts or stops lanes so that n run. A stopped lane finishes
// the requests it has in flight and sends no more.
func (g *Generator) SetSessions(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.lanes) > n {
		last := g.lanes[len(g.lanes)-1]
		last.stop.Store(true)
		g.lanes = g.lanes[:len(g.lanes)-1]
	}
	for len(g.lanes) < n {
		l := &lane{id: len(g.lanes), tier: tierOf(len(g.lanes), g.o.Mix), start: g.starts.Add(1)}
		g.lanes = append(g.lanes, l)
		g.wg.Add(1)
		go g.run(l)
	}
}

// Stop stops every lane after its requests in flight, waits up to grace
// (wall time) for them, then cancels what is still in flight.
func (g *Generator) Stop(grace time.Duration) {
	g.SetSessions(0)
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		g.cancel()
		<-done
	}
	g.cancel()
}

// tierOf spreads tiers evenly over lanes: after any n lanes, each tier has
// its share of them, rounded, so every step of a ladder runs the mix.
func tierOf(i int, mix []TierShare) string {
	total := 0.0
	for _, m := range mix {
		total += m.Share
	}
	have := make([]float64, len(mix))
	pick := 0
	for n := 0; n <= i; n++ {
		pick = 0
		bestGap := -1e18
		for k, m := range mix {
			// how far this tier is behind its share after n+1 lanes
			if gap := m.Share/total*float64(n+1) - have[k]; gap > bestGap {
				pick, bestGap = k, gap
			}
		}
		have[pick]++
	}
	return mix[pick].Tier
}

// plan is a session cut into the parent's turns and its subagents'
// branches, with where each branch forks and joins.
//
// A branch (one subagent's turns) starts after the parent turn that precedes
// its first turn, and gates the first later parent turn that starts after the
// branch ends (its last turn's start plus api_time): that turn waits for it,
// as a parent waits for a subagent's result. A branch that ends after the
// parent's last turn starts gates nothing and runs in the background; the
// play ends when the parent and every branch have.
type plan struct {
	parent   []int // indices into Session.Turns
	branches []branch
}

type branch struct {
	turns []int // indices into Session.Turns, in order
	after int   // the parent position it follows; -1: the start of the play
	gate  int   // the parent position that waits for it; -1: none
}

func planOf(s Session) plan {
	var p plan
	byAgent := map[string]int{}
	for i, t := range s.Turns {
		if t.Agent == "" {
			p.parent = append(p.parent, i)
			continue
		}
		b, ok := byAgent[t.Agent]
		if !ok {
			b = len(p.branches)
			byAgent[t.Agent] = b
			p.branches = append(p.branches, branch{})
		}
		p.branches[b].turns = append(p.branches[b].turns, i)
	}
	for k := range p.branches {
		b := &p.branches[k]
		end := 0.0
		for _, i := range b.turns {
			end = max(end, s.Turns[i].Start+s.Turns[i].APITime)
		}
		b.after, b.gate = -1, -1
		for pos, i := range p.parent {
			// Turns are in start order, a parent before the subagent it spawns
			if i < b.turns[0] {
				b.after = pos
			}
		}
		for pos := b.after + 1; pos < len(p.parent); pos++ {
			if s.Turns[p.parent[pos]].Start >= end {
				b.gate = pos
				break
			}
		}
	}
	return p
}

func (g *Generator) run(l *lane) {
	defer g.wg.Done()
	sessions := g.o.Tiers[l.tier]
	if len(sessions) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(g.o.Seed, uint64(l.id)+1))
	order := rng.Perm(len(sessions))
	for play := 0; !g.stopped(l); play++ {
		s := sessions[order[play%len(order)]]
		g.play(l, s, planOf(s), play, rng)
	}
}

func (g *Generator) stopped(l *lane) bool { return l.stop.Load() || g.ctx.Err() != nil }

// play replays one session: the parent's turns in order on this goroutine,
// each branch on its own once its fork point has passed.
func (g *Generator) play(l *lane, s Session, p plan, play int, rng *rand.Rand) {
	// a lane started again (after a drain, say) is a new lane to the cache
	marker := l.start<<32 | uint64(play)
	start := 0
	if play == 0 && len(p.parent) > 1 {
		// Start at a seeded point inside the session, and prime the cache
		// with the parent turn before it so the lane joins warm.
		start = rng.IntN(len(p.parent))
		if start > 0 {
			g.prime(l, s, marker, play, p.parent[start-1])
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	done := make([]chan struct{}, len(p.branches))
	spawn := func(after int) {
		for k, b := range p.branches {
			if b.after != after {
				continue
			}
			done[k] = make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(done[k])
				g.branch(l, s, marker, play, b.turns)
			}()
		}
	}
	if start == 0 {
		spawn(-1)
	} else {
		spawn(start - 1) // the primed turn's subagents; earlier ones are skipped
	}
	for pos := start; pos < len(p.parent); pos++ {
		if g.stopped(l) {
			return
		}
		for k, b := range p.branches {
			if b.gate == pos && done[k] != nil {
				select {
				case <-done[k]:
				case <-g.ctx.Done():
					return
				}
			}
		}
		i := p.parent[pos]
		if pos > start {
			if err := g.o.Clock.Sleep(g.ctx, g.think(s.Turns[i])); err != nil {
				return
			}
		}
		rec := g.send(l, s, marker, play, i, "")
		if rec.Failed() && rec.Error != ErrAborted {
			// the conversation ends: its later turns, and the subagents
			// they would have spawned, are never sent
			var rest []int
			rest = append(rest, p.parent[pos+1:]...)
			for _, b := range p.branches {
				if b.after >= pos {
					rest = append(rest, b.turns...)
				}
			}
			g.unsent(l, s, play, rest, rec.Send)
			return
		}
		spawn(pos)
	}
}

// branch replays one subagent's turns in order.
func (g *Generator) branch(l *lane, s Session, marker uint64, play int, turns []int) {
	for k, i := range turns {
		if g.stopped(l) {
			return
		}
		if k > 0 {
			if err := g.o.Clock.Sleep(g.ctx, g.think(s.Turns[i])); err != nil {
				return
			}
		}
		rec := g.send(l, s, marker, play, i, "")
		if rec.Failed() && rec.Error != ErrAborted {
			g.unsent(l, s, play, turns[k+1:], rec.Send)
			return
		}
	}
}

// prime sends a priming request (max_tokens 1) bounded by PrimeTimeout; its
// outcome is recorded but does not stop the lane.
func (g *Generator) prime(l *lane, s Session, marker uint64, play, i int) {
	g.primeMu.Lock()
	g.priming.Started++
	g.priming.Pending++
	g.primeMu.Unlock()
	began := g.o.Clock.Now()
	rec := g.send(l, s, marker, play, i, PhasePrime)
	ended := g.o.Clock.Now()
	g.primeMu.Lock()
	g.priming.Pending--
	if rec.Failed() {
		g.priming.Failed++
	}
	if rec.Error == ErrTimeout {
		g.priming.TimedOut++
	}
	g.priming.Last = max(g.priming.Last, ended)
	g.priming.Longest = max(g.priming.Longest, ended-began)
	g.primeMu.Unlock()
}

func (g *Generator) think(t trace.Turn) time.Duration {
	d := time.Duration(t.ThinkTime * float64(time.Second))
	switch g.o.ThinkTime {
	case ThinkNone:
		return 0
	case ThinkCapped:
		return min(d, g.o.ThinkCap)
	}
	return d
}

// bufPool holds prompt buffers; a lane with branches needs one per branch.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

func (g *Generator) send(l *lane, s Session, marker uint64, play, i int, phase string) Record {
	t := s.Turns[i]
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	b := g.o.Prompts
	if t.BlockSize > 0 {
		b.BlockSize = t.BlockSize
	}
	*bp = b.Append((*bp)[:0], s.ID, marker, t.HashIDs, t.In)
	ideal := l.idealCached(marker, t.HashIDs, b.BlockSize, t.In)
	maxTokens := max(t.Out, 1)
	timeout := g.o.Timeout
	tag := *g.tag.Load()
	if phase == "" {
		phase = tag.Phase
	} else {
		maxTokens = 1
		if g.o.PrimeTimeout > 0 {
			timeout = min(timeout, g.o.PrimeTimeout)
		}
	}
	c := g.o.Clock
	tierFlight := g.tierFlight[l.tier]
	g.inFlight.Add(1)
	if tierFlight != nil {
		tierFlight.Add(1)
	}
	raise(&l.peak, l.inFlight.Add(1))
	sent := time.Now()
	rec := Record{
		V: RecordVersion, Step: tag.Step, Sessions: tag.Sessions, Phase: phase,
		Lane: l.id, Session: s.ID, Tier: s.Tier, Play: play, Turn: t.Index, Agent: t.Agent,
		PlannedPromptTokens: t.In, IdealCachedTokens: ideal, MaxTokens: maxTokens, Send: c.At(sent).Seconds(),
	}
	if g.o.OnSend != nil {
		g.o.OnSend(rec)
	}
	res := g.o.Client.Stream(g.ctx, *bp, maxTokens, c.Real(timeout))
	l.inFlight.Add(-1)
	if tierFlight != nil {
		tierFlight.Add(-1)
	}
	g.inFlight.Add(-1)
	rec.ServedPromptTokens, rec.CachedTokens, rec.OutputTokens = res.PromptTokens, res.Cached, res.OutputTokens
	rec.ReasoningTokens, rec.ReasoningChunks, rec.AnswerChunks = res.ReasoningTokens, res.ReasoningChunks, res.AnswerChunks
	rec.Status, rec.Error, rec.Detail = res.Status, res.Error, res.Detail
	if !res.First.IsZero() {
		rec.FirstToken = c.At(res.First).Seconds()
		rec.LastToken = c.At(res.Last).Seconds()
	}
	if res.ReasoningChunks > 0 && !res.FirstAnswer.IsZero() {
		rec.FirstAnswer = c.At(res.FirstAnswer).Seconds()
	}
	g.o.Sink(rec)
	return rec
}

// raise lifts peak to n if n is higher.
func raise(peak *atomic.Int64, n int64) {
	for p := peak.Load(); n > p; p = peak.Load() {
		if peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// unsent records the turns a failed conversation never sent: they are errors.
func (g *Generator) unsent(l *lane, s Session, play int, turns []int, at float64) {
	tag := *g.tag.Load()
	for _, i := range turns {
		t := s.Turns[i]
		g.o.Sink(Record{
			V: RecordVersion, Step: tag.Step, Sessions: tag.Sessions, Phase: tag.Phase,
			Lane: l.id, Session: s.ID, Tier: s.Tier, Play: play, Turn: t.Index, Agent: t.Agent,
			PlannedPromptTokens: t.In, MaxTokens: max(t.Out, 1), Send: at,
			Error: ErrUnsent, Detail: "an earlier turn of this conversation failed",
		})
	}
}
