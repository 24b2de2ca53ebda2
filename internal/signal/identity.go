package signal

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"
)

// processWatch notices a metrics URL that answers from different processes
// on successive scrapes, as a Kubernetes Service URL or a load balancer in
// front of several pods does: each scrape then reads another pod's
// counters, and deltas between them mean nothing. It looks at three clues
// per URL: process_start_time_seconds, a pod or host name the process
// labels its own series with, and the URL's counter total bouncing back and
// forth. Its zero value is ready; it is safe for concurrent use.
type processWatch struct {
	mu      sync.Mutex
	targets map[string]*answers
	warned  []string // one warning per URL, in the order they were found
}

// answers is what one URL has answered so far.
type answers struct {
	seen    map[string][]string // clue -> the distinct values it took, in order
	last    map[string]string   // clue -> its value in the last scrape
	total   float64             // the counter total in the last scrape
	peak    float64             // the total before a drop in the last scrape; NaN otherwise
	bounces []string            // drops followed by a return to the level before them
	scrapes int
	lastSeq uint64 // the newest scrape observed, by when it was sent
	warned  bool
}

// identityLabels are labels a process may put on its own series to say
// which pod or host it is; a URL whose series carry more than one value of
// one of them (a gateway labelling its backends) gives no clue from it.
var identityLabels = []string{"pod", "pod_name", "kubernetes_pod_name", "hostname"}

// startTimeFamily is the process collector's start time, in Unix seconds.
const startTimeFamily = "process_start_time_seconds"

// observe records one scrape of target (seq orders scrapes by when they
// were sent, families as parsed, total the sum of the counters the mapping
// read from it) and returns a warning the first time the target is seen
// answering from different processes. A scrape that answers after a later
// one (two scrapes overlapping: the scrape loop and an idle wait) read the
// counters earlier; it is left out, or one process would look like two.
func (w *processWatch) observe(target, name string, seq uint64, families map[string]*dto.MetricFamily, total float64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.targets == nil {
		w.targets = map[string]*answers{}
	}
	a := w.targets[target]
	if a == nil {
		a = &answers{seen: map[string][]string{}, last: map[string]string{}, peak: math.NaN()}
		w.targets[target] = a
	}
	if seq != 0 && seq < a.lastSeq {
		return ""
	}
	a.lastSeq = max(a.lastSeq, seq)
	a.scrapes++
	var evidence []string
	clues := processClues(families)
	for _, clue := range sortedKeys(clues) {
		v := clues[clue]
		prev, had := a.last[clue]
		a.last[clue] = v
		if !had || v == prev {
			if !slices.Contains(a.seen[clue], v) {
				a.seen[clue] = append(a.seen[clue], v)
			}
			continue
		}
		switch {
		case slices.Contains(a.seen[clue], v):
			evidence = append(evidence, fmt.Sprintf("%s went from %s back to %s, seen before", clue, prev, v))
		case clue == startTimeFamily && earlier(v, prev):
			evidence = append(evidence, fmt.Sprintf("%s went from %s to %s, a process that started earlier", clue, prev, v))
		default:
			a.seen[clue] = append(a.seen[clue], v) // a restart: a new process, once
		}
	}
	// A restarted process climbs back from zero over many scrapes; one that
	// is back at the old level by the very next scrape is another process.
	peak := a.peak
	a.peak = math.NaN()
	if a.scrapes > 1 {
		switch {
		case total < a.total:
			a.peak = a.total
		case !math.IsNaN(peak) && total >= peak:
			a.bounces = append(a.bounces, fmt.Sprintf("%g, down to %g, back to %g", peak, a.total, total))
		}
	}
	a.total = total
	if len(a.bounces) >= 2 {
		evidence = append(evidence, fmt.Sprintf("its counters went down and straight back up %d times (%s)", len(a.bounces), strings.Join(a.bounces, ", ")))
	}
	if len(evidence) == 0 || a.warned {
		return ""
	}
	a.warned = true
	msg := fmt.Sprintf("metrics URL %s answers from different processes on successive scrapes (%s): it looks like a Service or load balancer spreading scrapes over several pods, so each scrape reads another pod's counters and the deltas between them mean nothing; scrape every pod with recipe.discovery.kubernetes, or read them through recipe.prometheus", name, strings.Join(evidence, "; "))
	w.warned = append(w.warned, msg)
	return msg
}

// warnings returns a copy of the warnings found so far.
func (w *processWatch) warnings() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.warned)
}

// processClues reads what says which process answered: its start time (all
// values, sorted, when several processes of one pod report) and the one
// value of each identity label its series carry.
func processClues(families map[string]*dto.MetricFamily) map[string]string {
	out := map[string]string{}
	if mf, ok := families[startTimeFamily]; ok {
		var vs []float64
		for _, m := range mf.GetMetric() {
			if v, ok := valueOf(m, ""); ok && !math.IsNaN(v) {
				vs = append(vs, v)
			}
		}
		slices.Sort(vs)
		var parts []string
		for _, v := range vs {
			parts = append(parts, strconv.FormatFloat(v, 'f', -1, 64))
		}
		if len(parts) > 0 {
			out[startTimeFamily] = strings.Join(parts, ",")
		}
	}
	values := map[string]map[string]bool{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if slices.Contains(identityLabels, lp.GetName()) {
					if values[lp.GetName()] == nil {
						values[lp.GetName()] = map[string]bool{}
					}
					values[lp.GetName()][lp.GetValue()] = true
				}
			}
		}
	}
	for label, vs := range values {
		if len(vs) == 1 {
			for v := range vs {
				out["label "+label] = strconv.Quote(v)
			}
		}
	}
	return out
}

// earlier reports whether start times a (one or more, comma-separated) all
// come before the earliest of b.
func earlier(a, b string) bool {
	first := func(s string) float64 {
		v, err := strconv.ParseFloat(strings.Split(s, ",")[0], 64)
		if err != nil {
			return math.NaN()
		}
		return v
	}
	last := func(s string) float64 {
		parts := strings.Split(s, ",")
		v, err := strconv.ParseFloat(parts[len(parts)-1], 64)
		if err != nil {
			return math.NaN()
		}
		return v
	}
	return last(a) < first(b)
}
