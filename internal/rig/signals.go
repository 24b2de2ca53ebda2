package rig

import (
	"errors"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/signal"
)

// engineOfFamilies tells the engine behind the metrics from its family
// prefixes, target by target: vllm:* or sglang:*; "" when neither shows (a
// gateway, another engine).
func engineOfFamilies(fams []map[string]*dto.MetricFamily) string {
	for _, target := range fams {
		names := make([]string, 0, len(target))
		for name := range target {
			names = append(names, name)
		}
		for _, eng := range []string{"vllm", "sglang"} {
			if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, eng+":") }) {
				return eng
			}
		}
	}
	return ""
}

// checkSignals checks that the mapping reads every signal the bar needs
// from series that exist, and where the bar sits in the histograms it is
// judged on. A rule that cannot read what it should is an error; what may
// still read right (no 5xx yet) and bars inside a bucket are notes.
func checkSignals(m signal.Mapping, fams []map[string]*dto.MetricFamily, cfg config.Run) (notes []string, err error) {
	var fatal, notYet []string
	for _, p := range m.Coverage(fams, barSignals(cfg.Bar.ClientErrors)) {
		switch {
		case !p.Note:
			fatal = append(fatal, p.Text)
		case !slices.Contains(notYet, p.Common):
			// On a fresh engine no refusal or server error has happened
			// yet: the usual case, said once, in short. The full text is
			// for a counter whose labels do not match at all.
			notYet = append(notYet, p.Common)
		}
	}
	if len(fatal) > 0 {
		return nil, errors.New("the metric mapping cannot read what the bar needs: " + strings.Join(fatal, "; "))
	}
	if len(notYet) > 0 {
		notes = append(notes, strings.Join(notYet, ", ")+": no matching series yet (they read 0 until the server counts one; `headroom plan` lists the rules)")
	}
	return append(notes, m.BucketNotes(fams, cfg.Bar.TTFTP90S, cfg.Bar.InteractivityP90TPS)...), nil
}
