package load

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/trace"
)

func TestTierOfKeepsTheMixAtEveryCount(t *testing.T) {
	mix := []TierShare{{"heavy", 0.5}, {"light", 0.5}}
	heavy := 0
	for i := 0; i < 20; i++ {
		if tierOf(i, mix) == "heavy" {
			heavy++
		}
		// after i+1 lanes, heavy has half of them, rounded either way
		if n := i + 1; heavy != n/2 && heavy != (n+1)/2 {
			t.Fatalf("after %d lanes %d are heavy, want %d or %d", n, heavy, n/2, (n+1)/2)
		}
	}
	third := []TierShare{{"heavy", 1}, {"light", 2}}
	h := 0
	for i := 0; i < 9; i++ {
		if tierOf(i, third) == "heavy" {
			h++
		}
	}
	if h != 3 {
		t.Errorf("a 1:2 mix over 9 lanes gave %d heavy, want 3", h)
	}
}

type collector struct {
	mu   sync.Mutex
	recs []Record
}

func (c *collector) add(r Record) { c.mu.Lock(); c.recs = append(c.recs, r); c.mu.Unlock() }
func (c *collector) all() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Record(nil), c.recs...)
}

func sessionOf(id string, turns int) Session {
	s := Session{ID: id, Tier: "light"}
	for i := 0; i < turns; i++ {
		s.Turns = append(s.Turns, trace.Turn{Index: i, In: 100 + 10*i, Out: 5, HashIDs: []int64{1, 2}})
	}
	return s
}

func TestLanesReplayAndRecord(t *testing.T) {
	srv := sseServer(t, 5, nil)
	clock, _ := timescale.New(1)
	col := &collector{}
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": {sessionOf("a", 3), sessionOf("b", 4)}},
		Mix:   []TierShare{{"light", 1}}, Prompts: prompt.Builder{Seed: 1, BlockSize: 64},
		ThinkTime: ThinkNone, Timeout: 5 * time.Second, Seed: 7, Sink: col.add,
	})
	g.SetTag(Tag{Step: 0, Sessions: 2, Phase: PhaseMeasure})
	g.SetSessions(2)
	deadline := time.Now().Add(5 * time.Second)
	for len(col.all()) < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	g.Stop(time.Second)
	recs := col.all()
	if len(recs) < 20 {
		t.Fatalf("only %d records in 5 s", len(recs))
	}
	lanes := map[int]bool{}
	for _, r := range recs {
		lanes[r.Lane] = true
		if r.V != RecordVersion || r.Session == "" {
			t.Fatalf("record without version or session: %+v", r)
		}
		if r.Failed() {
			t.Errorf("unexpected failure %s: %s", r.Error, r.Detail)
		}
		if r.Phase == PhasePrime && r.MaxTokens != 1 {
			t.Errorf("a priming request must be capped at 1 token, got %d", r.MaxTokens)
		}
		if r.Phase == PhaseMeasure && r.MaxTokens != 5 {
			t.Errorf("max_tokens %d, want the trace's answer length 5", r.MaxTokens)
		}
		if r.ServedPromptTokens != 120 || r.FirstToken < r.Send || r.LastToken < r.FirstToken {
			t.Errorf("record times or usage wrong: %+v", r)
		}
	}
	if len(lanes) != 2 {
		t.Errorf("records came from lanes %v, want 2 lanes", lanes)
	}
	if g.InFlight() != 0 {
		t.Errorf("%d requests in flight after Stop", g.InFlight())
	}
}

func TestFailedConversationCountsItsUnsentTurns(t *testing.T) {
	// The server refuses any prompt longer than 115 words: turn 2 of 4
	// (130 words incl. marker) fails, so turns 3 and 4 are never sent.
	srv := sseServer(t, 3, func(w http.ResponseWriter, r *http.Request) bool {
		buf := make([]byte, 1<<20)
		n, _ := r.Body.Read(buf)
		if words := strings.Count(string(buf[:n]), " ") + 1; words > 115+10 {
			http.Error(w, `{"object":"error","message":"too long"}`, 400)
			return true
		}
		return false
	})
	clock, _ := timescale.New(1)
	col := &collector{}
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": {sessionOf("a", 5)}},
		Mix:   []TierShare{{"light", 1}}, Prompts: prompt.Builder{Seed: 1, BlockSize: 64},
		ThinkTime: ThinkNone, Timeout: 5 * time.Second, Seed: 1, Sink: col.add,
	})
	g.SetTag(Tag{Phase: PhaseMeasure})
	g.SetSessions(1)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		unsent := 0
		for _, r := range col.all() {
			if r.Error == ErrUnsent {
				unsent++
			}
		}
		if unsent >= 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.Stop(time.Second)
	var refused, unsent int
	for _, r := range col.all() {
		switch r.Error {
		case ErrRefused:
			refused++
		case ErrUnsent:
			unsent++
			if r.Status != 0 {
				t.Errorf("an unsent turn has status %d", r.Status)
			}
		}
	}
	if refused == 0 || unsent == 0 {
		t.Errorf("refused %d, unsent %d: a refusal must end the conversation and count the turns it never sent", refused, unsent)
	}
}

// forked is a session whose parent (turns at 0, 10, 20 s) spawns subagents a
// and b in parallel after its first turn, both done by 6 s so they gate the
// turn at 10 s, and subagent c after its second turn, still running when the
// parent's last turn starts: c runs in the background.
func forked() Session {
	turns := []trace.Turn{
		{Start: 0, In: 100, Out: 3},
		{Agent: "a", Start: 1, In: 50, Out: 3, APITime: 1},
		{Agent: "b", Start: 1, In: 50, Out: 3, APITime: 1},
		{Agent: "a", Start: 3, In: 60, Out: 3, APITime: 1},
		{Agent: "b", Start: 4, In: 60, Out: 3, APITime: 2},
		{Start: 10, In: 150, Out: 3, APITime: 1},
		{Agent: "c", Start: 11, In: 50, Out: 3, APITime: 1},
		{Agent: "c", Start: 13, In: 60, Out: 3, APITime: 1},
		{Agent: "c", Start: 19, In: 70, Out: 3, APITime: 15},
		{Start: 20, In: 200, Out: 3, APITime: 1},
	}
	for i := range turns {
		turns[i].Index = i
		turns[i].HashIDs = []int64{1, 2, int64(i + 3)}
	}
	return Session{ID: "forked", Tier: "light", Turns: turns}
}

func TestPlanForksAndJoins(t *testing.T) {
	p := planOf(forked())
	if len(p.parent) != 3 || len(p.branches) != 3 {
		t.Fatalf("plan has %d parent turns and %d branches, want 3 and 3", len(p.parent), len(p.branches))
	}
	cases := []struct {
		agent       string
		after, gate int
	}{
		{"a", 0, 1},  // forks after the first parent turn, joins before the second
		{"b", 0, 1},  // in parallel with a
		{"c", 1, -1}, // ends at 34 s, after the last parent turn: background
	}
	for k, c := range cases {
		b := p.branches[k]
		if got := forked().Turns[b.turns[0]].Agent; got != c.agent || b.after != c.after || b.gate != c.gate {
			t.Errorf("branch %d: agent %s after %d gate %d, want %s after %d gate %d", k, got, b.after, b.gate, c.agent, c.after, c.gate)
		}
	}
}

func TestSubagentsRunInParallelInsideTheirLane(t *testing.T) {
	// Every request is held 30 ms, so branches sent together overlap.
	srv := sseServer(t, 3, func(w http.ResponseWriter, r *http.Request) bool {
		time.Sleep(30 * time.Millisecond)
		return false
	})
	clock, _ := timescale.New(1)
	col := &collector{}
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": {forked()}},
		Mix:   []TierShare{{"light", 1}}, Prompts: prompt.Builder{Seed: 1},
		ThinkTime: ThinkNone, Timeout: 5 * time.Second, Seed: 3, Sink: col.add,
	})
	g.SetTag(Tag{Phase: PhaseMeasure})
	g.SetSessions(1)
	g.mu.Lock()
	lane0 := g.lanes[0]
	g.mu.Unlock()
	playDone := func() bool {
		n := 0
		for _, r := range col.all() {
			if r.Play == 1 {
				n++
			}
		}
		return n == len(forked().Turns)
	}
	peakTier := 0
	deadline := time.Now().Add(10 * time.Second)
	for !playDone() && time.Now().Before(deadline) {
		peakTier = max(peakTier, g.InFlightByTier()["light"])
		time.Sleep(2 * time.Millisecond)
	}
	g.Stop(time.Second)
	if !playDone() {
		t.Fatalf("the second play did not finish in 10 s; %d records", len(col.all()))
	}
	// Play 1 starts at the session's beginning: check its order.
	byTurn := map[int]Record{}
	for _, r := range col.all() {
		if r.Play == 1 {
			if r.Failed() {
				t.Fatalf("turn %d failed: %s %s", r.Turn, r.Error, r.Detail)
			}
			byTurn[r.Turn] = r
		}
	}
	for turn, want := range map[int]string{0: "", 1: "a", 2: "b", 6: "c", 9: ""} {
		if byTurn[turn].Agent != want {
			t.Errorf("turn %d has agent %q, want %q", turn, byTurn[turn].Agent, want)
		}
	}
	// The parent's second turn waited for a and b; a and b started after the first.
	for _, child := range []int{1, 2, 3, 4} {
		if byTurn[child].Send < byTurn[0].LastToken {
			t.Errorf("subagent turn %d was sent before the parent turn that spawns it ended", child)
		}
		if byTurn[5].Send < byTurn[child].LastToken {
			t.Errorf("parent turn 5 was sent before subagent turn %d, which gates it, ended", child)
		}
	}
	// a and b overlapped, and so did c and the parent's last turn.
	overlap := func(x, y Record) bool { return x.Send < y.LastToken && y.Send < x.LastToken }
	if !overlap(byTurn[1], byTurn[2]) {
		t.Errorf("parallel subagents a and b did not overlap: %+v %+v", byTurn[1], byTurn[2])
	}
	if !overlap(byTurn[6], byTurn[9]) {
		t.Errorf("background subagent c did not run alongside the parent's last turn")
	}
	// The lane had more than one request in flight at once.
	if peak := lane0.peak.Load(); peak < 2 {
		t.Errorf("lane 0 peaked at %d requests in flight, want at least 2", peak)
	}
	t.Logf("peak in flight for the light tier, sampled: %d", peakTier)
}

// neverPrimes is a server that never answers a priming request (max_tokens
// 1), and a seed whose first play of a 50-turn session starts past its
// first turn, so the lane primes.
func neverPrimes(t *testing.T) (*httptest.Server, uint64) {
	t.Helper()
	srv := sseServer(t, 2, func(w http.ResponseWriter, r *http.Request) bool {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.Contains(string(body), `"max_tokens":1,`) {
			<-r.Context().Done()
			return true
		}
		return false
	})
	seed := uint64(0)
	for ; ; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		rng.Perm(1)
		if rng.IntN(50) > 0 {
			return srv, seed
		}
	}
}

func TestPrimingIsBoundedAndReported(t *testing.T) {
	srv, seed := neverPrimes(t)
	long := sessionOf("long", 50)
	clock, _ := timescale.New(1)
	col := &collector{}
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": {long}}, Mix: []TierShare{{"light", 1}},
		ThinkTime: ThinkNone, Timeout: 5 * time.Second, PrimeTimeout: 50 * time.Millisecond,
		Seed: seed, Sink: col.add,
	})
	g.SetSessions(1)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if p := g.Priming(); p.Started == 1 && p.Pending == 0 && len(col.all()) > 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.Stop(time.Second)
	p := g.Priming()
	if p.Started != 1 || p.Pending != 0 || p.Failed != 1 || p.TimedOut != 1 {
		t.Errorf("priming %+v, want 1 started, 0 pending, 1 failed, 1 timed out", p)
	}
	if p.Longest < 50*time.Millisecond || p.Last < p.Longest {
		t.Errorf("priming took %v and ended at %v; it is bounded at 50ms, so it took at least that", p.Longest, p.Last)
	}
	recs := col.all()
	if len(recs) < 2 || recs[0].Phase != PhasePrime || recs[0].Error != ErrTimeout {
		t.Fatalf("first record %+v, want a priming timeout", recs[0])
	}
	if recs[1].Failed() || recs[1].Turn != recs[0].Turn+1 {
		t.Errorf("after the timed-out prime the lane must go on with the next turn: %+v", recs[1])
	}
}

// TestStoppedLanePrimingIsNotLate: a lane stopped while its priming is in
// flight finishes that request, and when it runs past PrimeTimeout the
// lane joins no judged time: it must not count as timed out. It did, and
// the sweep read it as a lane of the next step joining cold ("warm-up too
// short: 2 lanes' priming timed out during step 6's warm-up" after a
// left-out repeat of 12 heavy sessions), ending the run.
func TestStoppedLanePrimingIsNotLate(t *testing.T) {
	srv, seed := neverPrimes(t)
	long := sessionOf("long", 50)
	clock, _ := timescale.New(1)
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": {long}}, Mix: []TierShare{{"light", 1}},
		ThinkTime: ThinkNone, Timeout: 5 * time.Second, PrimeTimeout: 100 * time.Millisecond,
		Seed: seed, Sink: func(Record) {},
	})
	defer g.Stop(time.Second)
	g.SetSessions(1)
	wait := func(ok func(Priming) bool) Priming {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if p := g.Priming(); ok(p) {
				return p
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("priming %+v: not reached in 10 s", g.Priming())
		return Priming{}
	}
	wait(func(p Priming) bool { return p.Started == 1 })
	g.SetSessions(0) // stopped with its priming in flight
	p := wait(func(p Priming) bool { return p.Pending == 0 })
	if p.TimedOut != 0 {
		t.Errorf("priming %+v: a stopped lane's priming counted as timed out", p)
	}
}

func TestIdealCachedFollowsThePlaysPrefixes(t *testing.T) {
	l := &lane{}
	cases := []struct {
		name   string // what the prompt is
		marker uint64
		ids    []int64
		tokens int
		want   int
	}{
		{"first prompt of a play: nothing cached", 1, []int64{1, 2, 3}, 180, 0},
		{"the next turn extends it: its 3 blocks are cached", 1, []int64{1, 2, 3, 4, 5}, 300, 3 * 64},
		{"a subagent forking after 2 blocks", 1, []int64{1, 2, 9}, 170, 2 * 64},
		{"a different first block shares nothing", 1, []int64{7, 2, 3}, 180, 0},
		{"cached tokens never exceed the prompt", 1, []int64{1, 2, 3, 4, 5}, 200, 200},
		{"a new play starts cold", 2, []int64{1, 2, 3, 4, 5}, 300, 0},
	}
	for _, c := range cases {
		if got := l.idealCached(c.marker, c.ids, 64, c.tokens); got != c.want {
			t.Errorf("%s: ideal cached %d, want %d", c.name, got, c.want)
		}
	}
}

// idealCachedByChains is the map of prefix chains idealCached kept before
// it kept the prompts themselves: the reference it must agree with.
type idealCachedByChains struct {
	marker uint64
	seen   map[uint64]struct{}
}

func (r *idealCachedByChains) cached(marker uint64, ids []int64, blockSize, tokens int) int {
	if r.seen == nil || r.marker != marker {
		r.seen, r.marker = map[uint64]struct{}{}, marker
	}
	chain := uint64(14695981039346656037)
	hit, matching := 0, true
	for i, id := range ids {
		chain = (chain ^ uint64(id)) * 1099511628211
		chain ^= chain >> 29
		if _, ok := r.seen[chain]; ok && matching {
			hit = i + 1
		} else {
			matching = false
			r.seen[chain] = struct{}{}
		}
	}
	return min(hit*blockSize, tokens)
}

// Over plays of growing conversations, subagents forking at any block,
// retries, prompts shorter than earlier ones, empty ones and new plays,
// idealCached answers what the map of prefix chains answered, and holds no
// more prompts than the play's branches.
func TestIdealCachedMatchesChains(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	l, ref := &lane{}, &idealCachedByChains{}
	marker := uint64(1)
	var conv []int64
	for step := range 20000 {
		var ids []int64
		switch k := r.IntN(10); {
		case k < 4: // the conversation's next turn
			for range 1 + r.IntN(4) {
				conv = append(conv, int64(r.IntN(50)))
			}
			ids = conv
		case k < 7: // a subagent: a start of it, then its own blocks
			ids = append([]int64(nil), conv[:r.IntN(len(conv)+1)]...)
			for range r.IntN(5) {
				ids = append(ids, int64(r.IntN(50)))
			}
		case k < 8: // a retry or a shorter prompt
			ids = conv[:r.IntN(len(conv)+1)]
		case k < 9: // unrelated blocks
			ids = []int64{int64(r.IntN(3)), int64(r.IntN(3))}
		default: // a new play
			marker++
			conv = nil
			continue
		}
		tokens := len(ids)*64 + r.IntN(100) - 50
		if got, want := l.idealCached(marker, ids, 64, tokens), ref.cached(marker, ids, 64, tokens); got != want {
			t.Fatalf("step %d (%d ids): ideal cached %d, the chains say %d", step, len(ids), got, want)
		}
		if len(l.sent) > 64 {
			t.Fatalf("step %d: %d prompts held", step, len(l.sent))
		}
	}
}
