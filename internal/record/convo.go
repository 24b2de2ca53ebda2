package record

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/headroom-bench/headroom/internal/trace"
)

// conversations groups requests into conversations and subagents by their
// prompts alone (docs/record.md has the rules):
//
//   - a request whose messages extend an agent's latest prompt (all of its
//     messages, then more, or the same again) is that agent's next turn;
//   - a request that shares a leading run of messages with an earlier
//     request, beyond its system messages, but does not extend the latest
//     prompt of the agent that sent them, forks: it starts a subagent of
//     that agent, spawned when the request arrives;
//   - any other request starts a conversation.
//
// Requests are taken in the order their answers ended, which keeps cause
// before effect: an agent sends its next turn, or spawns a subagent, only
// after the answer that led to it.
type conversations struct {
	prefix string
	idle   time.Duration
	made   int
	// byPrefix maps each message-prefix hash ever sent to the agent that
	// sent it first; tips maps each agent's latest prompt to the agent.
	byPrefix map[uint64]*agent
	tips     map[uint64]*agent
	live     []*conversation
}

type conversation struct {
	id       string
	start    time.Time
	last     time.Time // the latest answer's end
	root     *agent
	subs     int      // subagents spawned so far, for their ids
	prefixes []uint64 // the byPrefix entries it owns, dropped when it is written
}

type agent struct {
	conv   *conversation
	id     string // "" for the conversation itself, else agent_001, ...
	parent *agent
	spawn  time.Time
	calls  []*shape
	subs   []*agent
	tip    uint64
}

// finished is a conversation ready to be written.
type finished struct{ trace trace.Trace }

func newConversations(prefix string, idle time.Duration) *conversations {
	return &conversations{prefix: prefix, idle: idle, byPrefix: map[uint64]*agent{}, tips: map[uint64]*agent{}}
}

func (cs *conversations) open() int { return len(cs.live) }

// add places one request in its conversation.
func (cs *conversations) add(s *shape) {
	a := cs.place(s)
	a.calls = append(a.calls, s)
	c := a.conv
	if s.end.After(c.last) {
		c.last = s.end
	}
	for _, h := range s.chain {
		if _, seen := cs.byPrefix[h]; !seen {
			cs.byPrefix[h] = a
			c.prefixes = append(c.prefixes, h)
		}
	}
	if cs.tips[a.tip] == a {
		delete(cs.tips, a.tip)
	}
	a.tip = s.chain[len(s.chain)-1]
	cs.tips[a.tip] = a
}

// place finds the agent a request belongs to, making a subagent or a
// conversation when the rules say so.
func (cs *conversations) place(s *shape) *agent {
	k := 0 // messages shared with the longest earlier prompt prefix
	var owner *agent
	for i := len(s.chain) - 1; i >= 0; i-- {
		if a, ok := cs.byPrefix[s.chain[i]]; ok {
			k, owner = i+1, a
			break
		}
	}
	if k > 0 {
		if a, ok := cs.tips[s.chain[k-1]]; ok {
			return a // it extends that agent's latest prompt: its next turn
		}
		if k > s.firstTurn {
			// forks from the middle of a prompt, past its system messages
			c := owner.conv
			c.subs++
			sub := &agent{conv: c, id: fmt.Sprintf("agent_%03d", c.subs), parent: owner, spawn: s.arrival}
			owner.subs = append(owner.subs, sub)
			return sub
		}
	}
	cs.made++
	c := &conversation{id: fmt.Sprintf("%s-%04d", cs.prefix, cs.made), start: s.arrival, last: s.end}
	c.root = &agent{conv: c, spawn: s.arrival}
	cs.live = append(cs.live, c)
	return c.root
}

// closeIdle ends the conversations without an answer for the idle time.
func (cs *conversations) closeIdle(now time.Time) []finished {
	var out []finished
	keep := cs.live[:0]
	for _, c := range cs.live {
		if now.Sub(c.last) >= cs.idle {
			out = append(out, cs.finish(c))
		} else {
			keep = append(keep, c)
		}
	}
	clear(cs.live[len(keep):])
	cs.live = keep
	return out
}

// closeAll ends every conversation.
func (cs *conversations) closeAll() []finished {
	out := make([]finished, 0, len(cs.live))
	for _, c := range cs.live {
		out = append(out, cs.finish(c))
	}
	cs.live = nil
	return out
}

// finish forgets a conversation's prefixes and builds its trace.
func (cs *conversations) finish(c *conversation) finished {
	for _, h := range c.prefixes {
		if a := cs.byPrefix[h]; a != nil && a.conv == c {
			delete(cs.byPrefix, h)
		}
	}
	var each func(a *agent)
	each = func(a *agent) {
		if cs.tips[a.tip] == a {
			delete(cs.tips, a.tip)
		}
		for _, s := range a.subs {
			each(s)
		}
	}
	each(c.root)
	return finished{trace: c.build()}
}

// build writes a conversation as a Weka/AgentX trace. Hash ids are numbered
// from 1 in the order blocks were first sent in the conversation (scope
// local), so no hash value leaves the recorder.
func (c *conversation) build() trace.Trace {
	var all []*shape
	var collect func(a *agent)
	collect = func(a *agent) {
		all = append(all, a.calls...)
		for _, s := range a.subs {
			collect(s)
		}
	}
	collect(c.root)
	slices.SortStableFunc(all, func(a, b *shape) int { return a.arrival.Compare(b.arrival) })
	ids := map[uint64]int64{}
	for _, s := range all {
		for _, h := range s.blocks {
			if _, ok := ids[h]; !ok {
				ids[h] = int64(len(ids) + 1)
			}
		}
	}
	tokenBlocks := slices.ContainsFunc(all, func(s *shape) bool { return s.tokenBlocks })
	tokensPerWord := estimateRatio(all)
	block := BlockSize
	if !tokenBlocks {
		// a text block is BlockSize words; in tokens it is that many words
		// times the conversation's tokens per word
		block = max(1, int(math.Round(BlockSize*tokensPerWord)))
	}
	t := trace.Trace{ID: c.id, BlockSize: block, HashIDScope: "local"}
	t.Requests, t.Models = c.root.requests(c.start, ids)
	if first := c.root.calls; len(first) > 0 {
		t.ToolTokens = int(math.Round(float64(first[0].toolWords) * tokensPerWord))
		t.SystemTokens = int(math.Round(float64(first[0].systemWords) * tokensPerWord))
	}
	return t
}

// estimateRatio is the prompt tokens per word over the calls whose length
// is known, for the tool and system token estimates; 1 when none is.
func estimateRatio(all []*shape) float64 {
	in, words := 0, 0
	for _, s := range all {
		if s.inExact && s.words > 0 {
			in += s.in
			words += s.words
		}
	}
	if words == 0 {
		return 1
	}
	return float64(in) / float64(words)
}

// requests writes an agent's calls and subagents in the order they began,
// their times relative to base (the agent's spawn; the conversation's start
// for the conversation itself), and returns the models the calls used.
func (a *agent) requests(base time.Time, ids map[uint64]int64) ([]trace.Request, []string) {
	type entry struct {
		at  time.Time
		req trace.Request
	}
	var es []entry
	var models []string
	var lastEnd time.Time
	for _, s := range a.calls {
		r := trace.Request{
			T: secs(s.arrival.Sub(base)), Type: "n", Model: s.model, In: s.in, Out: s.out,
			InputTypes: []string{s.inputType}, OutputTypes: s.outputTypes, Stop: s.stop,
			APITime: secs(s.end.Sub(s.arrival)),
		}
		if s.stream {
			r.Type = "s"
		}
		if !lastEnd.IsZero() && s.arrival.After(lastEnd) {
			r.ThinkTime = secs(s.arrival.Sub(lastEnd))
		}
		if s.end.After(lastEnd) {
			lastEnd = s.end
		}
		if !s.first.IsZero() {
			ttft := secs(s.first.Sub(s.arrival))
			r.TTFT = &ttft
		}
		r.HashIDs = make([]int64, len(s.blocks))
		for i, h := range s.blocks {
			r.HashIDs[i] = ids[h]
		}
		if s.model != "" && !slices.Contains(models, s.model) {
			models = append(models, s.model)
		}
		es = append(es, entry{s.arrival, r})
	}
	for _, sub := range a.subs {
		reqs, subModels := sub.requests(sub.spawn, ids)
		e := trace.Request{
			T: secs(sub.spawn.Sub(base)), Type: trace.Subagent, AgentID: sub.id, Status: "completed",
			Models: subModels, Requests: reqs,
		}
		var end time.Time
		for _, s := range sub.calls {
			e.ToolUseCount += s.toolCalls
			if s.end.After(end) {
				end = s.end
			}
		}
		if n := len(sub.calls); n > 0 {
			last := sub.calls[n-1]
			e.TotalTokens = last.in + last.out
			e.DurationMS = math.Round(float64(end.Sub(sub.spawn)) / float64(time.Millisecond))
			ratio := estimateRatio(sub.calls)
			e.ToolTokens = int(math.Round(float64(sub.calls[0].toolWords) * ratio))
			e.SystemTokens = int(math.Round(float64(sub.calls[0].systemWords) * ratio))
		}
		es = append(es, entry{sub.spawn, e})
	}
	slices.SortStableFunc(es, func(x, y entry) int { return cmp.Compare(x.at.UnixNano(), y.at.UnixNano()) })
	out := make([]trace.Request, len(es))
	for i, e := range es {
		out[i] = e.req
	}
	return out, models
}

// secs is d in seconds, to the millisecond.
func secs(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }
