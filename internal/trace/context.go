package trace

// The served context and the turns that do not fit it.
//
// Rule: a turn fits a served context of n tokens when its prompt plus its
// answer cap fit, In + AnswerCap(t) <= n. This is vLLM's check: it refuses a
// request whose prompt tokens plus max_tokens exceed max_model_len
// (serving_engine.py, _validate_input: "This model's maximum context length
// is ..."). SGLang refuses at equality already (input + max_new_tokens >=
// context_len, TokenizerManager._validate_one_request), one token stricter;
// llama.cpp refuses a prompt longer than its slot's n_ctx and cuts the answer
// short instead. The cap counts because a replay always sends one (DESIGN:
// every request carries max_tokens from the trace's answer length), so a
// prompt that fits alone is still refused when its answer cap does not.

// AnswerCap is the max_tokens a replay sends with t: its recorded answer
// length, at least 1 (as load.Generator sends it).
func AnswerCap(t Turn) int { return max(t.Out, 1) }

// ContextNeed is how much context t takes on the server: its prompt plus its
// answer cap.
func ContextNeed(t Turn) int { return t.In + AnswerCap(t) }

// OverContext reports whether a server with a context of n tokens refuses t.
// n <= 0 means the context is unknown, and nothing is over it.
func OverContext(t Turn, n int) bool { return n > 0 && ContextNeed(t) > n }

// ContextCount is how many of one tier's planned turns need more than the
// served context, and how many a replay that skips them drops.
type ContextCount struct {
	Tier          string `json:"tier"`
	Turns         int    `json:"turns"`          // every planned turn, subagents' included
	Over          int    `json:"over"`           // of them, those over the context
	SubagentTurns int    `json:"subagent_turns"` // the subagents' share of Turns
	SubagentOver  int    `json:"subagent_over"`  // the subagents' share of Over
	// Dropped is how many turns TrimToContext took out: the turns over the
	// context and the rest of their conversations. SubagentDropped is the
	// subagents' share of it. Both stay 0 until trimming is counted.
	Dropped         int `json:"dropped"`
	SubagentDropped int `json:"subagent_dropped"`
}

// Share is the fraction of the turns that are over the context; 0 for none.
func (c ContextCount) Share() float64 {
	if c.Turns == 0 {
		return 0
	}
	return float64(c.Over) / float64(c.Turns)
}

// Add counts turns against a context of n tokens.
func (c *ContextCount) Add(turns []Turn, n int) {
	for _, t := range turns {
		sub := t.Agent != ""
		over := OverContext(t, n)
		c.Turns++
		if sub {
			c.SubagentTurns++
		}
		if over {
			c.Over++
			if sub {
				c.SubagentOver++
			}
		}
	}
}

// CountOverContext counts the turns of traces (as Turns flattens them) that
// are over a context of n tokens, under the tier name.
func CountOverContext(tier string, traces []Trace, n int) ContextCount {
	c := ContextCount{Tier: tier}
	for i := range traces {
		c.Add(traces[i].Turns(), n)
	}
	return c
}

// CountPromptsOver counts the model calls of traces, subagents' included,
// whose prompt alone is longer than n tokens, and all model calls. It is the
// figure a trace's statistics quote ("prompts over 512K"); OverContext also
// counts the answer cap.
func CountPromptsOver(traces []Trace, n int) (over, calls int) {
	for i := range traces {
		eachCall(traces[i].Requests, func(r *Request) {
			calls++
			if r.In > n {
				over++
			}
		})
	}
	return over, calls
}

// TrimToContext returns the turns of one session that a replay can honestly
// send to a server with a context of n tokens, in their order (Index kept),
// and how many it dropped (Dropped, SubagentDropped; the other counts are
// left 0).
//
// A turn over the context goes with everything after it in its conversation:
// each later prompt of that conversation carries the dropped turn's prompt
// and answer in its history, so sending it would replay a history the server
// could never have held, and since an agent's prompts grow turn by turn the
// later ones are mostly over the context too. It is what a refusal does to a
// live agent (the conversation ends), minus the refusal. The session's own
// calls are one conversation: the first of them over the context cuts them
// there, and with them the subagents spawned at or after the cut (those whose
// first turn comes after it, as the replay forks them). Each subagent is a
// conversation of its own: its first turn over the context cuts that
// subagent only, since its parent's later prompts carry its result, not its
// history. n <= 0 keeps everything.
func TrimToContext(turns []Turn, n int) ([]Turn, ContextCount) {
	var c ContextCount
	if n <= 0 {
		return turns, c
	}
	cut := len(turns) // position of the first parent turn over the context
	for i, t := range turns {
		if t.Agent == "" && OverContext(t, n) {
			cut = i
			break
		}
	}
	first := map[string]int{} // each subagent's first position
	cutAgent := map[string]bool{}
	kept := make([]Turn, 0, len(turns))
	for i, t := range turns {
		drop := false
		switch {
		case t.Agent == "":
			drop = i >= cut
		default:
			if _, ok := first[t.Agent]; !ok {
				first[t.Agent] = i
			}
			if first[t.Agent] > cut || cutAgent[t.Agent] || OverContext(t, n) {
				cutAgent[t.Agent] = true
				drop = true
			}
		}
		if !drop {
			kept = append(kept, t)
			continue
		}
		c.Dropped++
		if t.Agent != "" {
			c.SubagentDropped++
		}
	}
	return kept, c
}
