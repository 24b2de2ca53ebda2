package trace

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
)

// Anonymise returns traces made fit to share: what a replay needs (prompt
// and answer lengths, times, which blocks repeat, the subagent structure)
// is kept, and every name that could tie them back to where they were
// captured is replaced:
//
//   - the traces are put in an order drawn from salt, and named trace_0001,
//     trace_0002, ... in it;
//   - subagents are named agent_001, agent_002, ... in each trace, in the
//     order they appear;
//   - hash ids are numbered from 1 in the order they first appear: within
//     each trace when hash_id_scope is "local", across all the traces
//     otherwise (so blocks shared between traces stay shared);
//   - the producer's totals block is dropped (it is free-form).
//
// Equal ids stay equal and different ids stay different within their scope,
// so a replay's cache sees exactly what it saw before. Models, subagent
// types, lengths and times are kept: they are the shape being shared. salt
// should be fresh random bytes, never stored with the output; the same salt
// gives the same result. The input is not changed.
func Anonymise(traces []Trace, salt []byte) []Trace {
	order := make([]int, len(traces))
	keys := make([]uint64, len(traces))
	for i := range traces {
		order[i] = i
		keys[i] = saltedKey(salt, traces[i].ID, i)
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	width := max(4, len(fmt.Sprint(len(traces))))
	global := map[int64]int64{}
	out := make([]Trace, len(traces))
	for n, i := range order {
		t := traces[i]
		ids := global
		if t.HashIDScope == "local" {
			ids = map[int64]int64{}
		}
		agents := 0
		t.ID = fmt.Sprintf("trace_%0*d", width, n+1)
		t.Totals = nil
		t.Models = slices.Clone(t.Models)
		t.Requests = renumber(t.Requests, ids, &agents)
		out[n] = t
	}
	return out
}

// renumber copies reqs with hash ids and agent ids renumbered.
func renumber(reqs []Request, ids map[int64]int64, agents *int) []Request {
	out := make([]Request, len(reqs))
	for i, r := range reqs {
		if r.IsSubagent() {
			*agents++
			r.AgentID = fmt.Sprintf("agent_%03d", *agents)
			r.Models = slices.Clone(r.Models)
			r.Requests = renumber(r.Requests, ids, agents)
			out[i] = r
			continue
		}
		h := make([]int64, len(r.HashIDs))
		for k, id := range r.HashIDs {
			n, ok := ids[id]
			if !ok {
				n = int64(len(ids) + 1)
				ids[id] = n
			}
			h[k] = n
		}
		r.HashIDs = h
		r.InputTypes = slices.Clone(r.InputTypes)
		r.OutputTypes = slices.Clone(r.OutputTypes)
		if r.TTFT != nil {
			v := *r.TTFT
			r.TTFT = &v
		}
		out[i] = r
	}
	return out
}

// saltedKey orders traces by a hash of the salt, the trace's id and its
// position (ids are unique in a file, the position breaks ties otherwise).
func saltedKey(salt []byte, id string, pos int) uint64 {
	h := hmac.New(sha256.New, salt)
	var p [8]byte
	binary.LittleEndian.PutUint64(p[:], uint64(pos))
	h.Write(p[:])
	h.Write([]byte(id))
	return binary.LittleEndian.Uint64(h.Sum(nil))
}
