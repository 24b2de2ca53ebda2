package trace

import (
	"fmt"
	"math"
	"slices"
)

// SynthOptions sets up Synthesize.
type SynthOptions struct {
	Sessions int    // sessions (traces) to write
	Seed     uint64 // the same seed gives the same traces
	// HeavyShare is the share of heavy sessions, the rest being light. 0 means
	// the default 0.5; a negative value means none (light only), 1 all heavy.
	HeavyShare float64
	// MaxThink caps think times, in seconds; 0 keeps them as real sessions
	// have them (the median is 10 s, but one pause in a hundred is near an hour).
	MaxThink float64
	// ColdResumes makes some of a session's own turns resume cold, as real
	// sessions do: after a pause the prompt comes back with almost all of
	// its blocks new (no prefix-cache hit for the history), at the rate
	// real Claude Code sessions show for a pause that long (coldAfterThink).
	// The decision rides on the drawn pause, so it holds whatever MaxThink
	// or the replay's think-time setting does to the pause itself.
	ColdResumes bool
}

// tierModel describes one tier of synthetic sessions. Prompt sizes are in
// units of the session's level, its median prompt.
type tierModel struct {
	name string
	// Levels are log-normal, stratified over the tier's sessions.
	level, levelSigma float64
	// The session's own prompts follow start + (end-start) * u^curve, u
	// running from about 0 to 1 in random steps over the turns.
	start, end, curve  float64
	turnsMin, turnsMax int
	answer             float64 // median answer, tokens
	subagents          float64 // share of sessions that spawn subagents
	spawnsMax          int     // spawn events per such session, 1..spawnsMax
	parallelMax        int     // subagents per spawn, 1..parallelMax
	childTurnsMin      int
	childTurnsMax      int
	childTask          float64 // a subagent's first prompt: the parent's first prompt plus this
	childGrowth        float64 // median growth per subagent turn
}

// The two tiers are calibrated so that Tiers over a half-and-half mix
// reproduces the published AgentX table (heavy: median prompt 149K, p90
// 209K, 64% over 128K, median answer 461, 9% with subagents; light: 47K,
// 98K, 5%, 274, 47%). Tiers picks the longer half of the heavy sessions and
// the shorter half of the light ones, so the levels are set for those halves.
var (
	heavyTier = tierModel{
		name: "heavy", level: 146500, levelSigma: 0.03,
		start: 0.5, end: 1.5, curve: 1,
		turnsMin: 20, turnsMax: 60, answer: 461,
		subagents: 0.09, spawnsMax: 2, parallelMax: 2, childTurnsMin: 3, childTurnsMax: 10,
		childTask: 0.03, childGrowth: 0.02,
	}
	lightTier = tierModel{
		name: "light", level: 48600, levelSigma: 0.05,
		start: 0.4, end: 2, curve: 8,
		turnsMin: 12, turnsMax: 40, answer: 274,
		subagents: 0.47, spawnsMax: 3, parallelMax: 3, childTurnsMin: 3, childTurnsMax: 12,
		childTask: 0.08, childGrowth: 0.06,
	}
)

// answerSigma is the log-normal spread of answer lengths, as in real Claude
// Code sessions.
const answerSigma = 0.88

// Think times of real Claude Code sessions (the shared Weka corpus), as
// quantiles in seconds; samples interpolate log-linearly between them.
var (
	parentThink = []quantilePoint{{0, 1}, {0.01, 2}, {0.05, 3}, {0.1, 4}, {0.25, 6}, {0.5, 10}, {0.75, 34}, {0.9, 170}, {0.95, 480}, {0.99, 3146}, {1, 5041}}
	childThink  = []quantilePoint{{0, 1}, {0.05, 2}, {0.25, 3}, {0.5, 4}, {0.75, 6}, {0.9, 24}, {0.95, 38}, {0.99, 65}, {1, 124}}
)

type quantilePoint struct{ p, v float64 }

// coldAfterThink is the share of a session's own turns (not its subagents')
// whose prompt, over 20K tokens, comes back with more than half its blocks
// new, by the pause before it, in the shared Weka corpus of 474 Claude Code
// sessions (TestColdResumesMatchTheCorpus recounts it): an upper edge in
// seconds and the share of turns after a pause below it. A cold turn keeps
// coldKeep of its blocks, the median share the corpus's cold turns kept
// (their leading blocks: system prompt, tools, the start of the history).
var coldAfterThink = []struct{ below, share float64 }{
	{30, 204.0 / 24346}, {60, 19.0 / 2520}, {120, 43.0 / 2035}, {300, 120.0 / 2029},
	{600, 57.0 / 905}, {1800, 69.0 / 809}, {3600, 56.0 / 431}, {math.Inf(1), 66.0 / 203},
}

const coldKeep = 0.18

// coldShare is the share of turns after a pause of think seconds that
// resume cold.
func coldShare(think float64) float64 {
	for _, b := range coldAfterThink {
		if think < b.below {
			return b.share
		}
	}
	return coldAfterThink[len(coldAfterThink)-1].share
}

// Synthesize writes AgentX-like sessions: HeavyShare of them heavy, the rest
// light, calibrated to the published tier table. Prompts grow turn by turn
// and each extends the previous turn's hash ids (a prefix-cache hit for the
// history, new blocks for the new part); light sessions more often spawn
// subagents, whose ids start with their parent's first prompt (a fork) and
// then diverge. Session levels and which sessions spawn subagents are
// stratified, so a tier's figures hold closely even for a few hundred
// sessions. The output depends only on the options.
func Synthesize(o SynthOptions) []Trace {
	n := max(o.Sessions, 0)
	share := o.HeavyShare
	switch {
	case share == 0:
		share = 0.5
	case share < 0:
		share = 0
	case share > 1:
		share = 1
	}
	heavy := make([]bool, n)
	nh := 0
	for i := range n {
		// Spread heavy sessions evenly through the output.
		heavy[i] = math.Floor(float64(i+1)*share+0.5) > math.Floor(float64(i)*share+0.5)
		if heavy[i] {
			nh++
		}
	}
	hp := planTier(heavyTier, nh, newRNG(o.Seed, 1<<62))
	lp := planTier(lightTier, n-nh, newRNG(o.Seed, 1<<62+1))
	out := make([]Trace, 0, n)
	var hi, li int
	for i := range n {
		var id string
		var p sessionPlan
		if heavy[i] {
			p, id = hp[hi], fmt.Sprintf("heavy-%04d", hi+1)
			hi++
		} else {
			p, id = lp[li], fmt.Sprintf("light-%04d", li+1)
			li++
		}
		out = append(out, synthSession(id, p, newRNG(o.Seed, uint64(i)), o.MaxThink, o.ColdResumes))
	}
	return out
}

// sessionPlan is what is fixed for a session before it is generated.
type sessionPlan struct {
	tier      *tierModel
	level     float64
	subagents bool
}

// planTier draws m session levels, stratified over the log-normal, and marks
// which sessions spawn subagents, spread evenly over the levels so every band
// of levels has the tier's share.
func planTier(t tierModel, m int, r *rng) []sessionPlan {
	plans := make([]sessionPlan, m)
	order := r.perm(m)
	for i := range plans {
		p := (float64(order[i]) + r.float()) / float64(m)
		z := math.Sqrt2 * math.Erfinv(2*p-1)
		plans[i] = sessionPlan{tier: &t, level: t.level * math.Exp(t.levelSigma*z)}
	}
	byLevel := make([]int, m)
	for i := range byLevel {
		byLevel[i] = i
	}
	slices.SortFunc(byLevel, func(a, b int) int { return cmpFloat(plans[a].level, plans[b].level) })
	for rank, i := range byLevel {
		plans[i].subagents = math.Floor(float64(rank+1)*t.subagents+0.5) > math.Floor(float64(rank)*t.subagents+0.5)
	}
	return plans
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// call is a model call being planned, its prompt still in level units.
type call struct {
	x        float64 // prompt in level units
	in, out  int
	think    float64
	t        float64 // start: session seconds for the parent, spawn-relative for a child
	api      float64
	children [][]call // subagents spawned after this call, each its own calls
	spawn    float64  // when they were spawned, session seconds
	cold     bool     // the prompt resumes cold: its history's blocks are new
}

// synthSession generates one session following plan p.
func synthSession(id string, p sessionPlan, r *rng, maxThink float64, coldResumes bool) Trace {
	tm := p.tier
	nTurns := tm.turnsMin + r.intn(tm.turnsMax-tm.turnsMin+1)
	calls := make([]call, nTurns)
	// Random positive steps make the growth uneven, as tool results are.
	steps := make([]float64, nTurns)
	total := 0.0
	for k := range steps {
		total += math.Exp(0.6 * r.norm())
		steps[k] = total
	}
	for k := range calls {
		u := steps[k] / total
		calls[k].x = tm.start + (tm.end-tm.start)*math.Pow(u, tm.curve)
		calls[k].out = answer(tm.answer, r)
	}
	if p.subagents {
		spawns := 1 + r.intn(tm.spawnsMax)
		for range spawns {
			k := r.intn(max(nTurns-1, 1))
			par := 1 + r.intn(tm.parallelMax)
			for range par {
				nc := tm.childTurnsMin + r.intn(tm.childTurnsMax-tm.childTurnsMin+1)
				child := make([]call, nc)
				x := calls[0].x + tm.childTask*math.Exp(0.5*r.norm())
				for j := range child {
					child[j].x = x
					child[j].out = answer(tm.answer, r)
					x += tm.childGrowth*math.Exp(0.6*r.norm()) + float64(child[j].out)/p.level
				}
				calls[k].children = append(calls[k].children, child)
			}
		}
	}
	// A prompt holds at least the previous prompt and its answer: enforce it
	// at the scale the session ends up with (raising prompts lowers the
	// scale, so repeat until it holds).
	for range 10 {
		f := scale(calls, p.level)
		changed := false
		for k := 1; k < nTurns; k++ {
			if low := calls[k-1].x + 1.02*float64(calls[k-1].out)/f; calls[k].x < low {
				calls[k].x, changed = low, true
			}
		}
		if !changed {
			break
		}
	}
	scale(calls, p.level)

	// Times: each call waits its think time after the previous one ends;
	// after a spawn, the parent waits for its slowest subagent.
	now := 0.0
	for k := range calls {
		c := &calls[k]
		if k > 0 {
			c.think = think(parentThink, r, 0)
			if coldResumes {
				c.cold = r.float() < coldShare(c.think)
			}
			if maxThink > 0 {
				c.think = min(c.think, maxThink)
			}
		}
		c.t = now + c.think
		c.api = apiTime(c.in, c.out, r)
		now = c.t + c.api
		if len(c.children) > 0 {
			spawn := now + 1 + r.float()
			longest := 0.0
			for ci := range c.children {
				ct := 0.2 * r.float()
				for j := range c.children[ci] {
					cc := &c.children[ci][j]
					if j > 0 {
						cc.think = think(childThink, r, maxThink)
					}
					cc.t = ct + cc.think
					cc.api = apiTime(cc.in, cc.out, r)
					ct = cc.t + cc.api
				}
				longest = max(longest, ct)
			}
			c.spawn = spawn
			now = spawn + longest
		}
	}
	return assemble(id, calls, r)
}

// scale turns level units into tokens so that the session's PromptLength is
// its level exactly, and returns the tokens per unit.
func scale(calls []call, level float64) float64 {
	var xs []float64
	for _, c := range calls {
		xs = append(xs, c.x)
		for _, ch := range c.children {
			for _, cc := range ch {
				xs = append(xs, cc.x)
			}
		}
	}
	slices.Sort(xs)
	f := level / xs[(len(xs)+1)/2-1]
	for k := range calls {
		calls[k].in = max(1, int(math.Round(calls[k].x*f)))
		for _, ch := range calls[k].children {
			for j := range ch {
				ch[j].in = max(1, int(math.Round(ch[j].x*f)))
			}
		}
	}
	return f
}

const synthModel = "synthetic"

// assemble writes the planned calls as a trace with hash ids: each prompt
// extends the previous one's blocks (a cold one keeps only their first
// coldKeep and is new after them), and a subagent forks the parent's first
// prompt's full blocks.
func assemble(id string, calls []call, r *rng) Trace {
	t := Trace{ID: id, Models: []string{synthModel}, BlockSize: DefaultBlockSize, HashIDScope: "local"}
	next := int64(1)
	extend := func(run []int64, in int) []int64 {
		nb := (in + DefaultBlockSize - 1) / DefaultBlockSize
		for len(run) < nb {
			run = append(run, next)
			next++
		}
		return run
	}
	var run []int64
	agents := 0
	for k, c := range calls {
		if c.cold {
			// the history comes back under new blocks: only the leading
			// ones (system prompt, tools) still hit the cache
			nb := (c.in + DefaultBlockSize - 1) / DefaultBlockSize
			run = slices.Clone(run[:min(len(run), int(math.Round(coldKeep*float64(nb))))])
		}
		run = extend(run, c.in)
		req := modelRequest(c, run, k == 0, k == len(calls)-1)
		t.Requests = append(t.Requests, req)
		if len(c.children) == 0 {
			continue
		}
		fork := calls[0].in / DefaultBlockSize
		for _, ch := range c.children {
			agents++
			crun := slices.Clone(run[:min(fork, len(run))])
			entry := Request{
				T: round3(c.spawn), Type: Subagent, AgentID: fmt.Sprintf("agent_%03d", agents),
				SubagentType: []string{"Explore", "general-purpose"}[r.intn(2)], Status: "completed",
				Models: []string{synthModel}, ToolUseCount: len(ch) - 1,
			}
			last := 0.0
			for j, cc := range ch {
				crun = extend(crun, cc.in)
				entry.Requests = append(entry.Requests, modelRequest(cc, crun, j == 0, j == len(ch)-1))
				last = cc.t + cc.api
				entry.TotalTokens = cc.in + cc.out
			}
			entry.DurationMS = math.Round(last * 1000)
			t.Requests = append(t.Requests, entry)
		}
	}
	return t
}

func modelRequest(c call, run []int64, first, last bool) Request {
	in, stop := []string{"tool_result"}, "tool_use"
	if first {
		in = []string{"text"}
	}
	outTypes := []string{"text", "tool_use"}
	if last {
		stop, outTypes = "end_turn", []string{"text"}
	}
	return Request{
		T: round3(c.t), Type: "s", Model: synthModel, In: c.in, Out: c.out,
		HashIDs: run[:len(run):len(run)], InputTypes: in, OutputTypes: outTypes, Stop: stop,
		APITime: round3(c.api), ThinkTime: round3(c.think),
	}
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// answer draws an answer length with the given median.
func answer(median float64, r *rng) int {
	return min(max(1, int(math.Round(median*math.Exp(answerSigma*r.norm())))), 32000)
}

// apiTime models how long the original call took: prefill plus decode.
func apiTime(in, out int, r *rng) float64 {
	return (0.5 + float64(in)/40000 + float64(out)*0.025) * math.Exp(0.3*r.norm())
}

// think draws a think time from a quantile table, capped at maxThink if > 0.
func think(q []quantilePoint, r *rng, maxThink float64) float64 {
	u := r.float()
	v := q[len(q)-1].v
	for i := 1; i < len(q); i++ {
		if u <= q[i].p {
			a, b := q[i-1], q[i]
			f := (u - a.p) / (b.p - a.p)
			v = math.Exp(math.Log(a.v) + f*(math.Log(b.v)-math.Log(a.v)))
			break
		}
	}
	if maxThink > 0 {
		v = min(v, maxThink)
	}
	return math.Round(v*10) / 10
}

// rng is splitmix64: small, fast, and the same on every platform and Go
// release, so a seed always gives the same traces.
type rng struct{ s uint64 }

func newRNG(seed, stream uint64) *rng {
	return &rng{s: mix64(seed) ^ mix64(stream+0x632be59bd9b4e019)}
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// float is uniform in (0, 1).
func (r *rng) float() float64 { return (float64(r.next()>>11) + 0.5) / (1 << 53) }

// intn is uniform in [0, n).
func (r *rng) intn(n int) int { return int(r.float() * float64(n)) }

// norm is standard normal (Box-Muller).
func (r *rng) norm() float64 {
	return math.Sqrt(-2*math.Log(r.float())) * math.Cos(2*math.Pi*r.float())
}

// perm is a random permutation of [0, n).
func (r *rng) perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}
