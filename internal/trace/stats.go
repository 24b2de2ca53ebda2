package trace

import (
	"cmp"
	"math"
	"slices"
)

// Over128K is the prompt length, in tokens, above which a prompt counts as
// long in TierStats (128 Ki tokens).
const Over128K = 131072

// TierStats summarises a set of traces the way the AgentX tier table does.
// Prompt and answer figures are over every model call, subagents' included;
// quantiles are nearest-rank (the median of an even count is the lower one).
type TierStats struct {
	Name          string  `json:"name"`
	Traces        int     `json:"traces"`
	Requests      int     `json:"requests"`
	MedianPrompt  int     `json:"median_prompt"`
	P90Prompt     int     `json:"p90_prompt"`
	Over128K      float64 `json:"over_128k"` // share of prompts over 131,072 tokens
	MedianAnswer  int     `json:"median_answer"`
	WithSubagents float64 `json:"with_subagents"` // share of traces with a subagent
}

// PromptLength is the median prompt (`in`) of all model calls of t, its
// subagents' calls included; the lower median for an even count, 0 for none.
// Tiers rank traces by it.
func PromptLength(t Trace) int {
	var ins []int
	eachCall(t.Requests, func(r *Request) { ins = append(ins, r.In) })
	slices.Sort(ins)
	return quantile(ins, 0.5)
}

// Tiers returns the longest quarter (heavy) and the shortest quarter (light)
// of traces by PromptLength, ties broken by id; a quarter is len/4 traces,
// and at least one when there are any.
func Tiers(traces []Trace) (heavy, light []Trace) {
	type ranked struct {
		length int
		t      *Trace
	}
	rs := make([]ranked, len(traces))
	for i := range traces {
		rs[i] = ranked{PromptLength(traces[i]), &traces[i]}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.length, b.length), cmp.Compare(a.t.ID, b.t.ID))
	})
	q := len(rs) / 4
	if q == 0 && len(rs) > 0 {
		q = 1
	}
	for _, r := range rs[len(rs)-q:] {
		heavy = append(heavy, *r.t)
	}
	for _, r := range rs[:q] {
		light = append(light, *r.t)
	}
	return heavy, light
}

// Describe gives the tier table's figures for traces under name.
func Describe(name string, traces []Trace) TierStats {
	s := TierStats{Name: name, Traces: len(traces)}
	var ins, outs []int
	withSub := 0
	for i := range traces {
		if slices.ContainsFunc(traces[i].Requests, Request.IsSubagent) {
			withSub++
		}
		eachCall(traces[i].Requests, func(r *Request) {
			ins = append(ins, r.In)
			outs = append(outs, r.Out)
		})
	}
	s.Requests = len(ins)
	if len(ins) == 0 {
		return s
	}
	over := 0
	for _, in := range ins {
		if in > Over128K {
			over++
		}
	}
	slices.Sort(ins)
	slices.Sort(outs)
	s.MedianPrompt = quantile(ins, 0.5)
	s.P90Prompt = quantile(ins, 0.9)
	s.Over128K = float64(over) / float64(len(ins))
	s.MedianAnswer = quantile(outs, 0.5)
	s.WithSubagents = float64(withSub) / float64(len(traces))
	return s
}

// eachCall calls f for every model call in reqs, subagents' included.
func eachCall(reqs []Request, f func(*Request)) {
	for i := range reqs {
		if reqs[i].IsSubagent() {
			eachCall(reqs[i].Requests, f)
			continue
		}
		f(&reqs[i])
	}
}

// quantile is the nearest-rank p-quantile of sorted xs, 0 for none.
func quantile(xs []int, p float64) int {
	if len(xs) == 0 {
		return 0
	}
	k := int(math.Ceil(p*float64(len(xs)))) - 1
	return xs[min(max(k, 0), len(xs)-1)]
}
