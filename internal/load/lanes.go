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
	// Prompts builds each turn's text from its hash ids.
	Prompts prompt.Builder
	// ThinkTime is none, recorded or capped; ThinkCap bounds it when capped.
	ThinkTime string
	ThinkCap  time.Duration
	// Timeout is each request's client deadline, in modelled time.
	Timeout time.Duration
	Seed    uint64
	// Sink receives every record; it is called from many goroutines.
	Sink func(Record)
}

// TierShare is one tier's share of the lanes.
type TierShare struct {
	Tier  string
	Share float64
}

// Generator runs closed-loop lanes: each lane replays one session turn by
// turn and starts the next play when it ends.
type Generator struct {
	o        Options
	mu       sync.Mutex
	lanes    []*lane
	wg       sync.WaitGroup
	tag      atomic.Pointer[Tag]
	inFlight atomic.Int64
	ctx      context.Context
	cancel   context.CancelFunc
}

// Tag is what records sent now are labelled with.
type Tag struct {
	Step     int
	Sessions int
	Phase    string
}

type lane struct {
	id   int
	tier string
	stop atomic.Bool
}

// NewGenerator returns a generator with no lanes running.
func NewGenerator(o Options) *Generator {
	ctx, cancel := context.WithCancel(context.Background())
	g := &Generator{o: o, ctx: ctx, cancel: cancel}
	g.tag.Store(&Tag{Phase: PhaseWarmup})
	return g
}

// SetTag labels the records of requests sent from now on.
func (g *Generator) SetTag(t Tag) { g.tag.Store(&t) }

// InFlight is the number of requests waiting on the server now.
func (g *Generator) InFlight() int { return int(g.inFlight.Load()) }

// SetSessions starts or stops lanes so that n run. A stopped lane finishes
// the turn it has in flight and sends no more.
func (g *Generator) SetSessions(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.lanes) > n {
		last := g.lanes[len(g.lanes)-1]
		last.stop.Store(true)
		g.lanes = g.lanes[:len(g.lanes)-1]
	}
	for len(g.lanes) < n {
		l := &lane{id: len(g.lanes), tier: tierOf(len(g.lanes), g.o.Mix)}
		g.lanes = append(g.lanes, l)
		g.wg.Add(1)
		go g.run(l)
	}
}

// Stop stops every lane after its turn in flight, waits up to grace
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

func (g *Generator) run(l *lane) {
	defer g.wg.Done()
	sessions := g.o.Tiers[l.tier]
	if len(sessions) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(g.o.Seed, uint64(l.id)+1))
	order := rng.Perm(len(sessions))
	var buf []byte
	for play := 0; !l.stop.Load() && g.ctx.Err() == nil; play++ {
		s := sessions[order[play%len(order)]]
		start := 0
		if play == 0 && len(s.Turns) > 1 {
			// Start at a seeded point inside the session, and prime the
			// cache with the turn before it so the lane joins warm.
			start = rng.IntN(len(s.Turns))
			if start > 0 {
				buf = g.turn(l, s, play, start-1, buf, PhasePrime)
			}
		}
		marker := uint64(l.id)<<32 | uint64(play)
		for i := start; i < len(s.Turns); i++ {
			if l.stop.Load() || g.ctx.Err() != nil {
				return
			}
			if i > start {
				if err := g.o.Clock.Sleep(g.ctx, g.think(s.Turns[i])); err != nil {
					return
				}
			}
			var rec Record
			buf, rec = g.send(l, s, marker, play, i, buf, "")
			if rec.Failed() && rec.Error != ErrAborted {
				g.unsent(l, s, play, i+1, rec.Send)
				break
			}
		}
	}
}

// turn sends a priming request (max_tokens 1); its outcome is recorded but
// does not stop the lane.
func (g *Generator) turn(l *lane, s Session, play, i int, buf []byte, phase string) []byte {
	buf, _ = g.send(l, s, uint64(l.id)<<32|uint64(play), play, i, buf, phase)
	return buf
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

func (g *Generator) send(l *lane, s Session, marker uint64, play, i int, buf []byte, phase string) ([]byte, Record) {
	t := s.Turns[i]
	buf = g.o.Prompts.Append(buf[:0], s.ID, marker, t.HashIDs, t.In)
	maxTokens := max(t.Out, 1)
	tag := *g.tag.Load()
	if phase == "" {
		phase = tag.Phase
	} else {
		maxTokens = 1
	}
	c := g.o.Clock
	g.inFlight.Add(1)
	sent := time.Now()
	res := g.o.Client.Stream(g.ctx, buf, maxTokens, c.Real(g.o.Timeout))
	g.inFlight.Add(-1)
	rec := Record{
		V: RecordVersion, Step: tag.Step, Sessions: tag.Sessions, Phase: phase,
		Lane: l.id, Session: s.ID, Tier: s.Tier, Play: play, Turn: t.Index, Agent: t.Agent,
		PlannedPromptTokens: t.In, ServedPromptTokens: res.PromptTokens, CachedTokens: res.Cached,
		MaxTokens: maxTokens, OutputTokens: res.OutputTokens,
		Send: c.At(sent).Seconds(), Status: res.Status, Error: res.Error, Detail: res.Detail,
	}
	if !res.First.IsZero() {
		rec.FirstToken = c.At(res.First).Seconds()
		rec.LastToken = c.At(res.Last).Seconds()
	}
	g.o.Sink(rec)
	return buf, rec
}

// unsent records the turns a failed conversation never sent: they are errors.
func (g *Generator) unsent(l *lane, s Session, play, from int, at float64) {
	tag := *g.tag.Load()
	for i := from; i < len(s.Turns); i++ {
		t := s.Turns[i]
		g.o.Sink(Record{
			V: RecordVersion, Step: tag.Step, Sessions: tag.Sessions, Phase: tag.Phase,
			Lane: l.id, Session: s.ID, Tier: s.Tier, Play: play, Turn: t.Index, Agent: t.Agent,
			PlannedPromptTokens: t.In, MaxTokens: max(t.Out, 1), Send: at,
			Error: ErrUnsent, Detail: "an earlier turn of this conversation failed",
		})
	}
}
