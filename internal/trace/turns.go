package trace

import (
	"cmp"
	"slices"
)

// Turn is one model call to replay, with subagent calls flattened into the
// session's order by start time.
type Turn struct {
	Index     int     // position in the flattened order, from 0
	Agent     string  // "" for the session's own calls, else the subagent's agent_id
	In, Out   int     // prompt and answer tokens
	HashIDs   []int64 // one id per block of the prompt; read-only
	ThinkTime float64 // client-side delay before the call, seconds
	Start     float64 // when the call started, seconds from the session's start
	APITime   float64 // how long the original call took, seconds; 0 when unknown
	BlockSize int     // tokens per hash id, the trace's block_size
}

// Turns flattens t into the calls a replay sends, ordered by start time (ties
// keep the trace's order, parent before the subagent it spawns). A subagent
// group whose earliest child t is smaller than the group's t has child times
// relative to the spawn (as Claude Code captures do); otherwise its child
// times are taken as session-absolute. Nested subagents are flattened alike.
func (t Trace) Turns() []Turn {
	var turns []Turn
	flatten(t.Requests, "", 0, false, &turns)
	slices.SortStableFunc(turns, func(a, b Turn) int { return cmp.Compare(a.Start, b.Start) })
	block := t.BlockSize
	if block <= 0 {
		block = DefaultBlockSize
	}
	for i := range turns {
		turns[i].Index = i
		turns[i].BlockSize = block
	}
	return turns
}

func flatten(reqs []Request, agent string, base float64, relative bool, out *[]Turn) {
	at := func(x float64) float64 {
		if relative {
			return base + x
		}
		return x
	}
	for _, r := range reqs {
		if r.IsSubagent() {
			spawn := at(r.T)
			rel := false
			for _, c := range r.Requests {
				if c.T < spawn {
					rel = true
					break
				}
			}
			flatten(r.Requests, r.AgentID, spawn, rel, out)
			continue
		}
		*out = append(*out, Turn{Agent: agent, In: r.In, Out: r.Out, HashIDs: r.HashIDs, ThinkTime: r.ThinkTime, Start: at(r.T), APITime: r.APITime})
	}
}
