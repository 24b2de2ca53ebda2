package signal

import (
	"maps"
	"slices"
	"sync"

	dto "github.com/prometheus/client_model/go"
)

// rules is a mapping checked and compiled once. A run applies the same
// mapping to every scrape (hundreds on a virtual clock), and checking every
// rule and compiling a regular expression per matcher each time was most
// of what applying it cost.
type rules struct {
	from     Mapping // a copy of the mapping compiled, its Match maps cloned
	compiled []compiledRule
	err      error           // the first rule that does not check, as compile says
	want     map[string]bool // the families a scrape reads: the mapping's and the process watch's start time
}

// ruleCache keeps the rules of the last mapping it compiled; a mapping that
// differs from that one in any rule or field is compiled anew, so a
// Mapping field changed between scrapes is followed.
type ruleCache struct {
	mu   sync.Mutex
	last *rules
}

// get returns m's rules, compiled now or on an earlier call. The result is
// shared and read-only.
func (c *ruleCache) get(m Mapping) *rules {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && sameMapping(c.last.from, m) {
		return c.last
	}
	r := &rules{from: cloneMapping(m), want: map[string]bool{startTimeFamily: true}}
	r.compiled, r.err = r.from.compile()
	for _, f := range r.from.Families() {
		r.want[f] = true
	}
	c.last = r
	return r
}

// apply maps parsed families into the sample with the compiled rules (see
// Mapping.add).
func (r *rules) apply(families map[string]*dto.MetricFamily, prefix string, into *Sample) error {
	into.init()
	if r.err != nil {
		return r.err
	}
	return addRules(r.compiled, families, prefix, into)
}

func cloneMapping(m Mapping) Mapping {
	out := slices.Clone(m)
	for i := range out {
		out[i].Match = maps.Clone(out[i].Match)
	}
	return out
}

func sameMapping(a, b Mapping) bool {
	return slices.EqualFunc(a, b, func(x, y Rule) bool {
		// a NaN scale never equals itself: such a rule (which does not
		// check) is compiled again each time, and fails again
		return x.Common == y.Common && x.Metric == y.Metric && x.Kind == y.Kind && x.Scale == y.Scale &&
			x.Field == y.Field && x.Note == y.Note && maps.Equal(x.Match, y.Match)
	})
}
