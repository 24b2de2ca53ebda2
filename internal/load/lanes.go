package load

import (
	"context"
	"math"
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
	// Fresh, if set, gives the sessions of each tier that lanes started
	// after Reseed(epoch) replay (a corpus synthesised from a fresh seed, so
	// a repeated step draws fresh sessions, not only fresh plays of the same
	// ones); it is called once per epoch. A tier it leaves empty keeps Tiers'.
	Fresh func(epoch int) map[string][]Session
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
	// Retry is how a lane retries a turn and backs off a failing endpoint;
	// zero fields take DefaultRetry's.
	Retry RetryPolicy
	Seed  uint64
	// Sink receives every record; it is called from many goroutines.
	Sink func(Record)
	// OnSend, if set, receives each request as it goes out (no outcome yet),
	// so a step can count what it sent before the answers are in.
	OnSend func(Record)
	// Shard and Shards split the lanes over processes: with Shards > 1
	// this generator runs only the lane ids i with i % Shards == Shard, of
	// the n that SetSessions(n) asks for, each replaying what lane i of
	// one process would, so the shards together run one process's lanes.
	Shard, Shards int
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
	aheadMu    sync.Mutex
	aheads     map[aheadKey]aheadTurn // turns read ahead of their send, not sent yet
	retry      RetryPolicy
	mu         sync.Mutex
	lanes      []*lane
	history    map[int]*laneHistory // by lane id, over every start of that lane
	epoch      atomic.Int64         // see Reseed
	wg         *timescale.Group
	tag        atomic.Pointer[Tag]
	inFlight   atomic.Int64
	tierFlight map[string]*atomic.Int64
	starts     atomic.Uint64
	ctx        context.Context
	cancel     context.CancelFunc

	primeMu sync.Mutex
	priming Priming

	ghosts ghosts // unsent turns of failed conversations, not yet due

	freshMu sync.Mutex
	fresh   map[int64]map[string][]Session // Options.Fresh by epoch
}

// laneHistory is what every start of one lane id did so far: a lane started
// again goes on with the next plays of its order, never replaying one.
type laneHistory struct {
	plays  int // plays begun, the next play's number
	starts int
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
	id    int
	start uint64 // unique per lane start, so no two plays of the run share a marker
	tier  string
	// restart marks a lane id started before, or started after a Reseed:
	// its start points are drawn afresh.
	restart bool
	epoch   int64
	stop    atomic.Bool
	// ctx ends the lane's waits (think time, backoff) when it is stopped;
	// its requests in flight run on the generator's and finish.
	ctx    context.Context
	cancel context.CancelFunc
	// streak counts the lane's consecutive failures a retry may get past;
	// a success resets it. backoffs counts its waits, to draw their jitter.
	streak   atomic.Int64
	backoffs atomic.Uint64
	pace     pace
	inFlight atomic.Int64
	peak     atomic.Int64 // the most requests this lane ever had in flight at once

	// sent holds the hash ids of the prompts this lane sent in its
	// current play (sentMarker) that no later one of them starts with, to
	// tell how much of a prompt an ideal cache would hold. They are the
	// trace's own slices, never changed.
	sentMu     sync.Mutex
	sentMarker uint64
	sent       [][]int64
}

// idealCached returns how many of a prompt's tokens an ideal prefix cache
// would hold: the longest run of leading hash blocks that an earlier prompt
// of the same play already sent (plays never share cache). It then remembers
// this prompt's blocks. An earlier prompt that this one starts with is
// forgotten: whatever shares blocks with it shares as many with this one.
func (l *lane) idealCached(marker uint64, ids []int64, blockSize, tokens int) int {
	l.sentMu.Lock()
	defer l.sentMu.Unlock()
	if l.sentMarker != marker {
		clear(l.sent)
		l.sent, l.sentMarker = l.sent[:0], marker
	}
	hit, covered := 0, len(ids) == 0
	keep := l.sent[:0]
	for _, p := range l.sent {
		k := commonPrefix(p, ids)
		hit = max(hit, k)
		covered = covered || k == len(ids)
		if k < len(p) || k == len(ids) {
			keep = append(keep, p) // ids does not start with p and more: keep it
		}
	}
	clear(l.sent[len(keep):])
	l.sent = keep
	if !covered {
		l.sent = append(l.sent, ids)
	}
	return min(hit*blockSize, tokens)
}

// commonPrefix is the number of leading elements a and b share.
func commonPrefix(a, b []int64) int {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// NewGenerator returns a generator with no lanes running.
func NewGenerator(o Options) *Generator {
	if o.Clock == nil {
		o.Clock, _ = timescale.New(1)
	}
	if o.Client != nil && o.Client.clock == nil {
		o.Client.UseClock(o.Clock)
	}
	ctx, cancel := o.Clock.WithCancel(context.Background())
	g := &Generator{o: o, wg: o.Clock.NewGroup(), retry: o.Retry.orDefault(), ctx: ctx, cancel: cancel, tierFlight: map[string]*atomic.Int64{}, history: map[int]*laneHistory{}}
	for tier := range o.Tiers {
		g.tierFlight[tier] = new(atomic.Int64)
	}
	for _, m := range o.Mix {
		if g.tierFlight[m.Tier] == nil {
			g.tierFlight[m.Tier] = new(atomic.Int64)
		}
	}
	g.tag.Store(&Tag{Phase: PhaseWarmup})
	g.ghosts.due.Store(math.MaxInt64)
	return g
}

// SetTag labels the records of requests sent from now on. A change of tag
// ends the time the old one was judged in: the unsent turns of failed
// conversations due by now are recorded, the later ones dropped.
func (g *Generator) SetTag(t Tag) { g.retag(t) }

// Reseed makes the lanes started from now on draw fresh plays: start points
// from a new seed (mixed with epoch), and sessions from Options.Fresh when it
// is set, as a repeated step must not replay the traffic whose windows it
// pools with. Every lane start already gets new
// cache markers, and a lane id started again goes on with the next sessions
// of its order; Reseed(0) on a new generator changes nothing.
func (g *Generator) Reseed(epoch int) { g.epoch.Store(int64(epoch)) }

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

// SetSessions starts or stops lanes so that n run (with Options.Shards,
// this shard's lanes of n). A stopped lane finishes the requests it has in
// flight and sends no more.
func (g *Generator) SetSessions(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n = g.mine(n)
	for len(g.lanes) > n {
		last := g.lanes[len(g.lanes)-1]
		last.stop.Store(true)
		last.cancel()
		g.lanes = g.lanes[:len(g.lanes)-1]
	}
	for len(g.lanes) < n {
		id := g.laneID(len(g.lanes))
		h := g.history[id]
		if h == nil {
			h = &laneHistory{}
			g.history[id] = h
		}
		h.starts++
		epoch := g.epoch.Load()
		l := &lane{id: id, tier: tierOf(id, g.o.Mix), start: g.startOf(g.starts.Add(1)), restart: h.starts > 1 || epoch != 0, epoch: epoch}
		l.ctx, l.cancel = g.o.Clock.WithCancel(g.ctx)
		g.lanes = append(g.lanes, l)
		g.wg.Go(func() { g.run(l) })
	}
}

// mine is how many of lane ids 0..n-1 this shard runs.
func (g *Generator) mine(n int) int {
	s, k := g.o.Shards, g.o.Shard
	if s <= 1 {
		return n
	}
	if n <= k {
		return 0
	}
	return (n-k-1)/s + 1
}

// laneID is the id of this shard's j-th lane.
func (g *Generator) laneID(j int) int {
	if g.o.Shards <= 1 {
		return j
	}
	return g.o.Shard + j*g.o.Shards
}

// startOf makes this shard's k-th lane start (from 1) unique over every
// shard, as a lane start's number marks its plays' prompts for the cache:
// no two shards' plays may share one. A lane's first start gets the
// number it has in one process (its id + 1).
func (g *Generator) startOf(k uint64) uint64 {
	s := uint64(max(g.o.Shards, 1))
	return (k-1)*s + uint64(max(g.o.Shard, 0)) + 1
}

// Stop stops every lane after its requests in flight, waits up to grace
// (wall time) for them, then cancels what is still in flight.
func (g *Generator) Stop(grace time.Duration) {
	g.SetSessions(0)
	c := g.o.Clock
	gctx, stop := c.WithTimeout(context.Background(), c.Modelled(grace))
	err := g.wg.Wait(gctx)
	stop()
	if err != nil {
		g.cancel()
		_ = g.wg.Wait(context.Background())
	}
	g.cancel()
	// the lanes are gone: the unsent turns due by now count, no later ones
	g.ghosts.mu.Lock()
	g.emitLocked(g.o.Clock.Now(), true)
	g.ghosts.mu.Unlock()
}

// LanesPerTier is how many of n lanes each tier of mix gets (tierOf).
func LanesPerTier(n int, mix []TierShare) map[string]int {
	out := map[string]int{}
	for i := range n {
		out[tierOf(i, mix)]++
	}
	return out
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

// run replays sessions on one lane until it is stopped. Each lane id has
// its own order of the tier's sessions; a lane id started again goes on
// with the next play of that order and draws its start point afresh.
func (g *Generator) run(l *lane) {
	defer l.cancel()
	sessions := g.o.Tiers[l.tier]
	if l.epoch != 0 && g.o.Fresh != nil {
		if fresh := g.corpus(l.epoch)[l.tier]; len(fresh) > 0 {
			sessions = fresh
		}
	}
	if len(sessions) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(g.o.Seed, uint64(l.id)+1))
	order := rng.Perm(len(sessions))
	if l.restart {
		rng = rand.New(rand.NewPCG(g.o.Seed^mix64(uint64(l.epoch)), l.start))
	}
	for first := true; !g.stopped(l); first = false {
		// a conversation that ended on what a retry gets past (its tries
		// ran out) is followed by a wait, as its retries were
		if k := l.streak.Load(); k > 0 {
			if g.backoff(l, k, 0) != nil {
				return
			}
		}
		play := g.claimPlay(l.id)
		s := sessions[order[play%len(order)]]
		g.play(l, s, planOf(s), play, first, rng)
	}
}

// corpus returns Options.Fresh's sessions for epoch, made once.
func (g *Generator) corpus(epoch int64) map[string][]Session {
	g.freshMu.Lock()
	defer g.freshMu.Unlock()
	if c, ok := g.fresh[epoch]; ok {
		return c
	}
	if g.fresh == nil {
		g.fresh = map[int64]map[string][]Session{}
	}
	c := g.o.Fresh(int(epoch))
	g.fresh[epoch] = c
	return c
}

// claimPlay returns the number of lane id's next play.
func (g *Generator) claimPlay(id int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.history[id]
	h.plays++
	return h.plays - 1
}

func (g *Generator) stopped(l *lane) bool { return l.stop.Load() || g.ctx.Err() != nil }

// play replays one session: the parent's turns in order on this goroutine,
// each branch on its own once its fork point has passed. The first play of
// a lane start joins the session at a seeded point.
func (g *Generator) play(l *lane, s Session, p plan, play int, first bool, rng *rand.Rand) {
	// a lane started again (after a drain, say) is a new lane to the cache
	marker := l.start<<32 | uint64(play)
	start := 0
	if first && len(p.parent) > 1 {
		// Start at a seeded point inside the session, and prime the cache
		// with the parent turn before it so the lane joins warm.
		start = rng.IntN(len(p.parent))
		if start > 0 {
			// an endpoint turning requests away: wait before the first turn
			// as before a retry (a prime past its own bound needs no wait)
			if rec, after := g.prime(l, s, marker, play, p.parent[start-1]); rec.Error != ErrTimeout && retryable(rec) {
				if g.backoff(l, l.streak.Add(1), after) != nil {
					return
				}
			}
		}
	}
	c := g.o.Clock
	defer g.dropAheads(marker) // after the subagents below have ended
	wg := c.NewGroup()
	defer func() { _ = wg.Wait(context.Background()) }()
	done := make([]*timescale.Signal, len(p.branches))
	spawn := func(after int) {
		for k, b := range p.branches {
			if b.after != after {
				continue
			}
			done[k] = c.NewLatch()
			wg.Go(func() {
				defer done[k].Close()
				g.branch(l, s, marker, play, b.turns)
			})
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
				if _, err := c.WaitFor(g.ctx, "subagent", -1, done[k]); err != nil {
					return
				}
			}
		}
		i := p.parent[pos]
		if pos > start {
			if err := g.o.Clock.Sleep(l.ctx, g.think(s.Turns[i])); err != nil {
				return
			}
		}
		next := -1
		if pos+1 < len(p.parent) {
			next = p.parent[pos+1]
		}
		rec := g.try(l, s, marker, play, i, next)
		if rec.Failed() {
			if rec.Error == ErrAborted || g.stopped(l) {
				return
			}
			// the conversation ends: its later turns, and the subagents
			// they would have spawned, are never sent
			var rest []int
			rest = append(rest, p.parent[pos+1:]...)
			for _, b := range p.branches {
				if b.after >= pos {
					rest = append(rest, b.turns...)
				}
			}
			g.abandon(l, s, play, rest, rec)
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
			if err := g.o.Clock.Sleep(l.ctx, g.think(s.Turns[i])); err != nil {
				return
			}
		}
		next := -1
		if k+1 < len(turns) {
			next = turns[k+1]
		}
		rec := g.try(l, s, marker, play, i, next)
		if rec.Failed() {
			if rec.Error != ErrAborted && !g.stopped(l) {
				g.abandon(l, s, play, turns[k+1:], rec)
			}
			return
		}
	}
}

// prime sends a priming request (max_tokens 1) bounded by PrimeTimeout; its
// outcome is recorded but does not stop the lane. It returns the record and
// the wait a refusal's Retry-After asked for.
func (g *Generator) prime(l *lane, s Session, marker uint64, play, i int) (Record, time.Duration) {
	g.primeMu.Lock()
	g.priming.Started++
	g.priming.Pending++
	g.primeMu.Unlock()
	began := g.o.Clock.Now()
	rec, after := g.send(l, s, marker, play, i, PhasePrime, 0, -1)
	ended := g.o.Clock.Now()
	g.primeMu.Lock()
	g.priming.Pending--
	if rec.Failed() {
		g.priming.Failed++
	}
	if rec.Error == ErrTimeout && !g.stopped(l) {
		// a stopped lane's priming joins no judged time, cold or not
		g.priming.TimedOut++
	}
	g.priming.Last = max(g.priming.Last, ended)
	g.priming.Longest = max(g.priming.Longest, ended-began)
	g.primeMu.Unlock()
	if !rec.Failed() {
		l.streak.Store(0)
	}
	return rec, after
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

// send sends try attempt of turn i and records it; it returns the record
// and the wait a refusal's Retry-After asked for.
func (g *Generator) send(l *lane, s Session, marker uint64, play, i int, phase string, attempt, next int) (Record, time.Duration) {
	g.emitDue()
	t := s.Turns[i]
	b := g.o.Prompts
	if t.BlockSize > 0 {
		b.BlockSize = t.BlockSize
	}
	c := g.o.Clock
	// On a virtual clock the prompt is written as the server reads the
	// request (no modelled time passes meanwhile), so a lane waiting for
	// its handler holds none: a fleet's lanes all send at one instant.
	// On the wall clock it is written before the send is stamped, into a
	// buffer that goes back to the pool as soon as the server has the
	// request (or when send returns), not when the answer ends: a step of
	// thousands of sessions holds no prompt it has sent.
	var text *prompt.Text
	var bp *[]byte
	var release func()
	var ahead *Ahead
	normal := phase == "" && attempt == 0
	if c.Virtual() {
		text, ahead = g.takeAhead(marker, i, normal, max(t.Out, 1))
		if text == nil {
			text = b.Text(s.ID, marker, t.HashIDs, t.In)
		}
	} else {
		bp = bufPool.Get().(*[]byte)
		var put sync.Once
		release = func() { put.Do(func() { bufPool.Put(bp) }) }
		defer release()
		*bp = b.Append((*bp)[:0], s.ID, marker, t.HashIDs, t.In)
	}
	ideal := l.idealCached(marker, t.HashIDs, b.BlockSize, t.In)
	maxTokens := max(t.Out, 1)
	timeout := g.o.Timeout
	tag := *g.tag.Load()
	if phase == "" {
		phase = tag.Phase
	} else {
		maxTokens = 1
		if g.o.PrimeTimeout > 0 {
			// priming has its own bound (by default the warm-up): a short
			// client deadline for turns must not time out a long prompt's
			// prefill before the step starts
			timeout = g.o.PrimeTimeout
		}
	}
	tierFlight := g.tierFlight[l.tier]
	g.inFlight.Add(1)
	if tierFlight != nil {
		tierFlight.Add(1)
	}
	raise(&l.peak, l.inFlight.Add(1))
	sent := c.Time()
	rec := Record{
		V: RecordVersion, Step: tag.Step, Sessions: tag.Sessions, Phase: phase,
		Lane: l.id, Session: s.ID, Tier: s.Tier, Play: play, Turn: t.Index, Agent: t.Agent, Attempt: attempt,
		PlannedPromptTokens: t.In, IdealCachedTokens: ideal, MaxTokens: maxTokens, Send: c.At(sent).Seconds(),
	}
	if phase == tag.Phase && attempt == 0 {
		l.pace.observe(tag, c.At(sent))
	}
	if g.o.OnSend != nil {
		g.o.OnSend(rec)
	}
	var res Result
	if text != nil {
		var onHead func()
		if normal && next >= 0 {
			onHead = func() { g.readAhead(s, marker, next) }
		}
		res = g.o.Client.StreamPromptAhead(g.ctx, text, maxTokens, c.Real(timeout), ahead, onHead)
	} else {
		res = g.o.Client.StreamReleasing(g.ctx, *bp, maxTokens, c.Real(timeout), release)
	}
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
	return rec, res.RetryAfter
}

// raise lifts peak to n if n is higher.
func raise(peak *atomic.Int64, n int64) {
	for p := peak.Load(); n > p; p = peak.Load() {
		if peak.CompareAndSwap(p, n) {
			return
		}
	}
}
