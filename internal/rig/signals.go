package rig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/transport"
)

// maxMetricsBody bounds how much of one /metrics response pre-flight reads.
const maxMetricsBody = 64 << 20

// fetchFamilies reads every metrics target once and parses its exposition,
// for the engine check and the coverage check. The error names the first
// target that did not answer or did not parse, with its user info redacted.
func fetchFamilies(ctx context.Context, hc *http.Client, targets []string) ([]map[string]*dto.MetricFamily, error) {
	out := make([]map[string]*dto.MetricFamily, 0, len(targets))
	for _, t := range targets {
		fams, err := fetchOne(ctx, hc, t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", transport.URL(t), err)
		}
		out = append(out, fams)
	}
	return out, nil
}

func fetchOne(ctx context.Context, hc *http.Client, target string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("bad metrics URL: %w", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text repeats the URL, user info and all
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s (want 200 from a /metrics endpoint)", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil {
		return nil, fmt.Errorf("parsing the exposition: %w (is it a Prometheus /metrics endpoint in text format?)", err)
	}
	return fams, nil
}

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
