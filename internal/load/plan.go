package load

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
