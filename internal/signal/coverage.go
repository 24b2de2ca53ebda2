package signal

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Problem is one reason a mapping would read a signal the bar needs wrongly:
// a family no target has, a label the rules match on that the server does
// not use, a family of the wrong type. Such a rule reads 0 (or nothing) all
// run while pre-flight's "the family exists" check passes.
type Problem struct {
	Common string // the common name the problem is about
	Metric string // the family its rules read; "" when no rule names one
	// Note marks what may still read right: a counter whose matching series
	// appear only once something happens (no 4xx yet, no series at all).
	// Pre-flight reports notes and carries on; any other problem stops it.
	Note bool
	Text string // what is wrong and what to do, for a person
}

func (p Problem) String() string { return p.Text }

// seriesSet is one family's series gathered from every target.
type seriesSet struct {
	typ     dto.MetricType
	metrics []*dto.Metric
}

// gather merges the families of several targets by name.
func gather(fams []map[string]*dto.MetricFamily) map[string]*seriesSet {
	out := map[string]*seriesSet{}
	for _, target := range fams {
		for name, mf := range target {
			s, ok := out[name]
			if !ok {
				s = &seriesSet{typ: mf.GetType()}
				out[name] = s
			}
			s.metrics = append(s.metrics, mf.GetMetric()...)
		}
	}
	return out
}

// Coverage checks, over parsed metric families (one map per target, as
// expfmt's parser or the Prometheus source gives them), that the mapping
// reads every signal the bar needs from at least one series its label
// matchers select. need lists groups of common names; any one name of a
// group suffices (interactivity from TPOT or ITL). A group none of whose
// names is read gives the problems of all of them.
//
// A label a rule needs is missing when no series of the family carries it
// and no rule on the family reads series without it (as gen_ai's success
// rule reads series without error_type): that rule can only read 0, and the
// problem names the labels and values the family has. A label that is there
// with no matching value yet is only a note for a counter (no 5xx so far),
// and a problem for a histogram or gauge (it has no data at all).
func (m Mapping) Coverage(fams []map[string]*dto.MetricFamily, need [][]string) []Problem {
	rules, err := m.compile()
	if err != nil {
		return []Problem{{Text: err.Error()}}
	}
	got := gather(fams)
	var out []Problem
	for _, group := range need {
		var probs, noRule []Problem
		read := false
		for _, name := range group {
			p, ok := coverageOf(name, rules, got)
			if ok {
				read = true
				break
			}
			if !slices.ContainsFunc(rules, func(r compiledRule) bool { return r.Common == name }) {
				noRule = append(noRule, p...)
				continue
			}
			probs = append(probs, p...)
		}
		switch {
		case read:
		case len(probs) == 0:
			// no alternative has a rule: say so for each
			out = append(out, noRule...)
		default:
			// an alternative the mapping has no rule for stands in for
			// nothing; what the others' rules lack is the problem
			out = append(out, probs...)
		}
	}
	return out
}

// coverageOf checks one common name; ok is true when some rule for it reads
// at least one series.
func coverageOf(name string, rules []compiledRule, got map[string]*seriesSet) (probs []Problem, ok bool) {
	var families []string
	byFamily := map[string][]compiledRule{}
	for _, r := range rules {
		if r.Common != name {
			continue
		}
		if _, seen := byFamily[r.Metric]; !seen {
			families = append(families, r.Metric)
		}
		byFamily[r.Metric] = append(byFamily[r.Metric], r)
	}
	if len(families) == 0 {
		return []Problem{{Common: name, Text: fmt.Sprintf("the mapping has no rule for %s: add one in a mapping file (recipe.mapping_file)", name)}}, false
	}
	for _, f := range families {
		rs := byFamily[f]
		set := got[f]
		problem := func(note bool, format string, a ...any) {
			probs = append(probs, Problem{Common: name, Metric: f, Note: note, Text: fmt.Sprintf(format, a...)})
		}
		if set == nil {
			problem(false, "%s is in no target's metrics, so %s has no data: is the engine's or gateway's /metrics in recipe.metrics, and the mapping the one for that server?", f, name)
			continue
		}
		kindErr := ""
		for _, r := range rs {
			for _, s := range set.metrics {
				if !r.matches(s) {
					continue
				}
				if readable(r, s) {
					return nil, true
				}
				kindErr = fmt.Sprintf("%s is a %s family but the rule for %s reads it as a %s: fix the rule's kind or field in a mapping file (recipe.mapping_file)",
					f, strings.ToLower(set.typ.String()), name, ruleReads(r))
			}
		}
		counter := rs[0].Kind == Counter
		switch {
		case kindErr != "":
			problem(false, "%s", kindErr)
		case len(set.metrics) == 0 && counter:
			problem(true, "%s has no series yet, so the labels %s is matched on were not checked; it reads 0 until a series appears", f, name)
		case len(set.metrics) == 0:
			problem(false, "%s has no series, so %s has no data", f, name)
		default:
			labels := labelValues(set.metrics)
			var lacked []string
			for _, r := range rs {
				l := lackedLabels(r, labels, rules)
				if len(l) == 0 {
					lacked = nil
					break
				}
				lacked = append(lacked, strings.Join(l, " and "))
			}
			if len(lacked) > 0 {
				verb := "the rule for %s matches %s"
				if len(rs) > 1 {
					verb = "the rules for %s match %s"
				}
				problem(false, "%s has %s; "+verb+": %s would read 0 all run. Match the labels the server has in a mapping file (recipe.mapping_file)",
					f, describeLabels(labels), name, strings.Join(lacked, " or "), name)
				continue
			}
			var sel []string
			for _, r := range rs {
				sel = append(sel, describeMatchers(r))
			}
			if counter {
				problem(true, "no series of %s matches %s yet (it has %s): %s reads 0 until one does; if the server spells these values otherwise, fix the rule in a mapping file (recipe.mapping_file)",
					f, strings.Join(sel, " or "), describeLabels(labels), name)
			} else {
				problem(false, "no series of %s matches %s (it has %s), so %s has no data: fix the rule in a mapping file (recipe.mapping_file)",
					f, strings.Join(sel, " or "), describeLabels(labels), name)
			}
		}
	}
	return probs, false
}

// readable reports whether the series has the type the rule reads.
func readable(r compiledRule, s *dto.Metric) bool {
	if r.Kind == Histogram {
		return s.GetHistogram() != nil
	}
	_, ok := valueOf(s, r.Field)
	return ok
}

// ruleReads names what a rule reads a family as.
func ruleReads(r compiledRule) string {
	if r.Field != "" {
		return "histogram (field " + r.Field + ")"
	}
	return string(r.Kind)
}

// acceptsEmpty reports whether a matcher holds for a series without its label.
func (mt matcher) acceptsEmpty() bool { return mt.re.MatchString("") != mt.negate }

// lackedLabels lists the labels a rule needs that no series of its family
// carries, leaving out labels the mapping treats as optional on the family:
// some rule on it, matching on that label, reads series with no labels at
// all (gen_ai's success rule, error_type "").
func lackedLabels(r compiledRule, labels map[string][]string, rules []compiledRule) []string {
	var out []string
	for _, mt := range r.matchers {
		if mt.acceptsEmpty() || len(labels[mt.label]) > 0 || optionalLabel(r.Metric, mt.label, rules) {
			continue
		}
		out = append(out, mt.label)
	}
	return out
}

func optionalLabel(family, label string, rules []compiledRule) bool {
	for _, r := range rules {
		if r.Metric != family {
			continue
		}
		onLabel, empty := false, true
		for _, mt := range r.matchers {
			onLabel = onLabel || mt.label == label
			empty = empty && mt.acceptsEmpty()
		}
		if onLabel && empty {
			return true
		}
	}
	return false
}

// labelValues lists each label's distinct non-empty values over the series.
func labelValues(ms []*dto.Metric) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		for _, lp := range m.GetLabel() {
			n, v := lp.GetName(), lp.GetValue()
			if v == "" || n == "le" || n == "quantile" {
				continue
			}
			if !slices.Contains(out[n], v) {
				out[n] = append(out[n], v)
			}
		}
	}
	for _, vs := range out {
		slices.Sort(vs)
	}
	return out
}

// describeLabels writes "labels engine (0, 1), finish_reason (abort, ...)",
// at most a few values each.
func describeLabels(labels map[string][]string) string {
	if len(labels) == 0 {
		return "no labels"
	}
	const few = 4
	var parts []string
	for _, n := range sortedKeys(labels) {
		vs := labels[n]
		if len(vs) > few {
			vs = append(slices.Clone(vs[:few]), "...")
		}
		parts = append(parts, n+" ("+strings.Join(vs, ", ")+")")
	}
	word := "labels "
	if len(parts) == 1 {
		word = "label "
	}
	return word + strings.Join(parts, ", ")
}

// describeMatchers writes a rule's matchers as a PromQL selector.
func describeMatchers(r compiledRule) string {
	var parts []string
	for _, mt := range r.matchers {
		v := strings.TrimPrefix(r.Match[mt.label], "!")
		op := "=~"
		switch {
		case v == "" && !mt.negate:
			op = "="
		case v == "":
			op = "!="
		case mt.negate:
			op = "!~"
		}
		parts = append(parts, fmt.Sprintf("%s%s%q", mt.label, op, v))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// BucketNotes says where the bar sits in the histograms it is judged on.
// A P90 interval is never narrower than the bucket holding the P90, so when
// the bar lies strictly inside a bucket, a P90 that lands there reads too
// close however the load goes: the note names the bucket and what to do.
// ttftBar is in seconds; tpsBar in tokens/s per stream, judged on time per
// output token in seconds per token, 1/tpsBar. Interactivity derived from
// inter-token latency (DerivedTPOT) is a mean, not a bucketed quantile, so
// the ITL histogram's buckets bound nothing and are not checked. A bar of 0
// is not checked; nothing is said of a histogram no series reads.
func (m Mapping) BucketNotes(fams []map[string]*dto.MetricFamily, ttftBar, tpsBar float64) []string {
	rules, err := m.compile()
	if err != nil {
		return nil
	}
	got := gather(fams)
	var out []string
	if ttftBar > 0 {
		if f, bounds, ok := boundsOf(TTFT, rules, got); ok {
			if lo, hi, inside := bucketAround(bounds, ttftBar); inside {
				out = append(out, ttftNote(ttftBar, f, lo, hi))
			}
		}
	}
	if tpsBar > 0 {
		if f, bounds, ok := boundsOf(TPOT, rules, got); ok {
			if lo, hi, inside := bucketAround(bounds, 1/tpsBar); inside {
				out = append(out, speedNote(tpsBar, f, lo, hi))
			}
		}
	}
	return out
}

// boundsOf finds the finite bucket bounds (in seconds) of the first series
// a rule for the common name reads.
func boundsOf(name string, rules []compiledRule, got map[string]*seriesSet) (family string, bounds []float64, ok bool) {
	for _, r := range rules {
		if r.Common != name || r.Kind != Histogram || got[r.Metric] == nil {
			continue
		}
		for _, s := range got[r.Metric].metrics {
			if !r.matches(s) {
				continue
			}
			h, ok := histogramOf(s, r.scale)
			if !ok {
				continue
			}
			for _, u := range h.Upper {
				if !math.IsInf(u, 1) {
					bounds = append(bounds, u)
				}
			}
			if len(bounds) == 0 {
				continue
			}
			return r.Metric, bounds, true
		}
	}
	return "", nil, false
}

// bucketAround finds the bucket (lo, hi] holding x; inside is false when x
// is on a bound (to a relative 1e-9). Below the first bound lo is 0; above
// the last, hi is +Inf.
func bucketAround(bounds []float64, x float64) (lo, hi float64, inside bool) {
	for _, b := range bounds {
		if math.Abs(b-x) <= 1e-9*math.Max(math.Abs(b), math.Abs(x)) {
			return 0, 0, false
		}
	}
	lo, hi = 0, math.Inf(1)
	for _, b := range bounds {
		if b < x {
			lo = b
		} else {
			hi = b
			break
		}
	}
	return lo, hi, true
}

// num writes a number briefly: 5.3, 0.075, 13.33.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

const tooClose = "a P90 that lands in it reads too close whatever the load, since its interval spans the whole bucket"

func ttftNote(bar float64, family string, lo, hi float64) string {
	if math.IsInf(hi, 1) {
		return fmt.Sprintf("the TTFT bar %s s is above the last finite bucket bound of %s (%s s): %s; move the bar to %s s or below", num(bar), family, num(lo), tooClose, num(lo))
	}
	edges := num(hi) + " s"
	if lo > 0 {
		edges = num(lo) + " s or " + edges
	}
	return fmt.Sprintf("the TTFT bar %s s sits inside the bucket (%s, %s] of %s: %s; read TTFT from a gateway whose histogram has finer buckets (its /metrics in recipe.metrics, with its mapping), or move the bar to a bucket edge (%s)",
		num(bar), num(lo), num(hi), family, tooClose, edges)
}

func speedNote(bar float64, family string, lo, hi float64) string {
	per := 1 / bar
	if math.IsInf(hi, 1) {
		return fmt.Sprintf("the interactivity bar %s tokens/s is %s s per token, above the last finite bucket bound of %s (%s s, %s tokens/s): %s; move the bar to %s tokens/s or above",
			num(bar), num(per), family, num(lo), num(1/lo), tooClose, num(1/lo))
	}
	speeds := fmt.Sprintf("above %s tokens/s", num(1/hi))
	edges := num(1/hi) + " tokens/s"
	if lo > 0 {
		speeds = fmt.Sprintf("%s to %s tokens/s", num(1/hi), num(1/lo))
		edges = num(1/hi) + " or " + num(1/lo) + " tokens/s"
	}
	return fmt.Sprintf("the interactivity bar %s tokens/s is %s s per token, inside the bucket (%s, %s] s of %s (%s): %s; read time per output token from a gateway whose histogram has finer buckets, or move the bar to a bucket edge (%s)",
		num(bar), num(per), num(lo), num(hi), family, speeds, tooClose, edges)
}
