package signal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/headroom-bench/headroom/internal/transport"
)

// Scraper reads /metrics from every target and sums them into one Sample,
// keeping each target's series groups as parts keyed "URL{labels}". It
// also watches each URL for answers from different processes (see
// Warnings).
type Scraper struct {
	Targets []string // full /metrics URLs
	// Discover, when set, lists the targets before every scrape in place of
	// Targets (the pods behind a Service, found through Kubernetes), so pods
	// that come and go are followed: a pod that went away is a part that
	// stops, as a target that fails, and a new pod's part counts from zero.
	// A listing that fails keeps the last targets found and is named in
	// Sample.Errors.
	Discover func(ctx context.Context) ([]string, error)
	Mapping  Mapping      // engine names to common names
	Client   *http.Client // nil means http.DefaultClient; bound each scrape with ctx
	// Sequential scrapes the targets one after another instead of at once:
	// on a virtual clock, where goroutines must start on the clock and the
	// in-memory targets answer without delay.
	Sequential bool

	mu     sync.Mutex
	found  []string                          // the targets of the last listing that worked
	parsed map[string]map[string]parsedBlock // each target's last scrape, by family
	watch  processWatch
	seq    atomic.Uint64 // orders scrapes by when they were sent
	rules  ruleCache     // Mapping, compiled once
	last   *Pending      // the last scrape whose sample is worked out on a goroutine of its own
}

// maxBody bounds how much of one /metrics response is read.
const maxBody = 64 << 20

// Scrape reads every target at once and returns their sum, stamped with the
// modelled time at. Targets that fail are named in Sample.Errors; the error is
// non-nil only when no target answered.
func (s *Scraper) Scrape(ctx context.Context, at time.Duration) (Sample, error) {
	return s.ScrapeLater(ctx, at).Wait()
}

// sum adds the targets' parts into out, naming those that failed.
func sum(out Sample, targets []string, answers []answer) (Sample, error) {
	answered := 0
	errs := make([]error, len(targets))
	for i, target := range targets {
		name := transport.URL(target) // a target's user info is never written
		if err := answers[i].err; err != nil {
			errs[i] = fmt.Errorf("%s: %w", name, err) // the URL with its answer
			out.Errors = append(out.Errors, errs[i].Error())
			continue
		}
		if err := out.Merge(answers[i].part); err != nil {
			out.Errors = append(out.Errors, fmt.Sprintf("%s: summing with other targets: %v", name, err))
		}
		answered++
	}
	if answered == 0 {
		return out, fmt.Errorf("no metrics target answered: %w", errors.Join(errs...))
	}
	return out, nil
}

// targets lists the targets to scrape now: Targets, or the last listing
// of Discover. An error from Discover comes with the targets found before,
// if any.
func (s *Scraper) targets(ctx context.Context) ([]string, error) {
	if s.Discover == nil {
		return s.Targets, nil
	}
	found, err := s.Discover(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if len(s.found) > 0 {
			return slices.Clone(s.found), fmt.Errorf("finding the metrics targets failed, scraped the %d found before: %w", len(s.found), err)
		}
		return nil, fmt.Errorf("finding the metrics targets: %w", err)
	}
	s.found = slices.Clone(found)
	return found, nil
}

// List returns the targets a scrape would read now: Targets, or the pods
// Discover finds.
func (s *Scraper) List(ctx context.Context) ([]string, error) { return s.targets(ctx) }

// Warnings names each metrics URL seen answering from different processes
// on successive scrapes (a Service URL spreading scrapes over pods), with
// what to use instead. The run reports them with its warnings.
func (s *Scraper) Warnings() []string { return s.watch.warnings() }

// Families reads every target once and returns the metric families each
// exposes, parsed, in the order of the targets (the current listing when
// the targets are discovered). Pre-flight reads which families and series
// are there from them. The error names every target that failed.
func (s *Scraper) Families(ctx context.Context) ([]map[string]*dto.MetricFamily, error) {
	targets, err := s.targets(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]*dto.MetricFamily, len(targets))
	errs := make([]error, len(targets))
	s.each(len(targets), func(i int) {
		out[i], errs[i] = s.fetch(ctx, targets[i])
		if errs[i] != nil {
			errs[i] = fmt.Errorf("%s: %w", transport.URL(targets[i]), errs[i])
		}
	})
	return out, errors.Join(errs...)
}

// each runs f for 0..n-1, at once or (Sequential) in order.
func (s *Scraper) each(n int, f func(i int)) {
	if s.Sequential || n == 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// fetch reads and parses one target's exposition.
func (s *Scraper) fetch(ctx context.Context, target string) (map[string]*dto.MetricFamily, error) {
	return s.fetchWanted(ctx, target, nil)
}

// fetchWanted is fetch for the families in want (nil: all). Others may be
// left out of what it returns (see keepFamilies).
func (s *Scraper) fetchWanted(ctx context.Context, target string, want map[string]bool) (map[string]*dto.MetricFamily, error) {
	text, err := s.read(ctx, target)
	if err != nil {
		return nil, err
	}
	return s.parseWanted(target, text, want)
}

// read reads one target's exposition.
func (s *Scraper) read(ctx context.Context, target string) ([]byte, error) {
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("bad metrics URL: %w", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
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
	return io.ReadAll(io.LimitReader(resp.Body, maxBody))
}

// parseWanted parses a target's exposition for the families in want (nil:
// all).
func (s *Scraper) parseWanted(target string, text []byte, want map[string]bool) (map[string]*dto.MetricFamily, error) {
	if want != nil {
		if blocks, ok := keepFamilies(text, want); ok {
			if families, ok := s.parseBlocks(target, blocks); ok {
				return families, nil
			}
			// An error's line number is the whole text's: parse it all.
		}
	}
	families, err := parseText(text)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics exposition: %w (is the target a Prometheus /metrics endpoint in text format?)", err)
	}
	return families, nil
}

func parseText(text []byte) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(bytes.NewReader(text))
}

// wanted is the set of families a scrape reads: those the mapping names
// and the process watch's start time.
func (s *Scraper) wanted() map[string]bool { return s.rules.get(s.Mapping).want }

// keepFamilies cuts an exposition down to the families in want before it
// is parsed: parsing was most of a scrape's cost, and an engine exposes
// many families the mapping never reads. A family's block (its # HELP and
// # TYPE lines and the samples after them) is left out only when every
// sample in it is named as the family's own (name, name_bucket, _sum,
// _count), so what is parsed from the rest is what parsing the whole text
// gives for those families. It reports false, keeping nothing, when it
// cannot be sure: a block with a sample of another name, quoted (UTF-8)
// names, or a label the process watch reads (a pod or host name may sit on
// any series). Pre-flight reads every family (Families), so an exposition
// broken in a family no rule reads is still found there.
func keepFamilies(text []byte, want map[string]bool) ([]textBlock, bool) {
	for _, l := range identityLabels {
		if bytes.Contains(text, []byte(l+"=")) {
			return nil, false
		}
	}
	var out []textBlock
	block, start, keep := "", 0, true // the block being read (""; the lines before any) and whether it stays
	for i := 0; i < len(text); {
		end := len(text)
		if k := bytes.IndexByte(text[i:], '\n'); k >= 0 {
			end = i + k + 1
		}
		line := bytes.TrimLeft(text[i:end], " \t")
		switch {
		case len(line) == 0 || line[0] == '\n':
		case line[0] == '#':
			f := bytes.Fields(line[1:])
			if len(f) < 2 || (string(f[0]) != "HELP" && string(f[0]) != "TYPE") {
				break // a plain comment
			}
			if f[1][0] == '"' {
				return nil, false
			}
			if name := string(f[1]); name != block {
				if keep && i > start {
					out = append(out, textBlock{block, text[start:i]})
				}
				block, start, keep = name, i, want[name]
			}
		default:
			name := line
			if n := bytes.IndexAny(line, "{ \t"); n >= 0 {
				name = line[:n]
			}
			if block == "" {
				break // before any block: kept
			}
			if !ownSample(name, block) {
				return nil, false // a sample outside its family's block
			}
		}
		i = end
	}
	if keep && len(text) > start {
		out = append(out, textBlock{block, text[start:]})
	}
	return out, true
}

// textBlock is one family's lines in an exposition (name ""; the lines
// before the first family's).
type textBlock struct {
	name string
	text []byte
}

// parsedBlock is a block of a target's last scrape and its family.
type parsedBlock struct {
	text []byte
	mf   *dto.MetricFamily
}

// parseBlocks parses the blocks keepFamilies kept. A family whose block is
// byte for byte the one the target's last scrape parsed is that family
// again (an engine between steps, or a gauge that did not move): only the
// blocks that changed are parsed. It reports false when a parse fails, so
// the whole text is parsed for its error.
func (s *Scraper) parseBlocks(target string, blocks []textBlock) (map[string]*dto.MetricFamily, bool) {
	s.mu.Lock()
	prev := s.parsed[target]
	s.mu.Unlock()
	names := make(map[string]bool, len(blocks))
	unique := true
	for _, b := range blocks {
		if names[b.name] {
			unique = false // a family in two blocks: parse it all, cache nothing
		}
		names[b.name] = true
	}
	var changed []byte
	reused := map[string]*dto.MetricFamily{}
	for _, b := range blocks {
		if p, ok := prev[b.name]; ok && unique && b.name != "" && bytes.Equal(p.text, b.text) {
			reused[b.name] = p.mf
			continue
		}
		changed = append(changed, b.text...)
	}
	families, err := parseText(changed)
	if err != nil {
		return nil, false
	}
	for name, mf := range reused {
		if _, clash := families[name]; clash {
			return nil, false
		}
		families[name] = mf
	}
	if unique {
		next := make(map[string]parsedBlock, len(blocks))
		for _, b := range blocks {
			if mf, ok := families[b.name]; ok && b.name != "" {
				next[b.name] = parsedBlock{b.text, mf}
			}
		}
		s.mu.Lock()
		if s.parsed == nil {
			s.parsed = map[string]map[string]parsedBlock{}
		}
		s.parsed[target] = next
		s.mu.Unlock()
	}
	return families, true
}

// ownSample reports whether a sample named name belongs to family's block
// by its name alone: the family's name, or a histogram's or summary's
// _bucket, _sum or _count.
func ownSample(name []byte, family string) bool {
	if !bytes.HasPrefix(name, []byte(family)) {
		return false
	}
	switch string(name[len(family):]) {
	case "", "_bucket", "_sum", "_count":
		return true
	}
	return false
}

// finish works out one target's part of a scrape from the text it sent.
// A target whose exposition is partly unusable (bucket mismatch between its
// own series) still contributes what could be read; a target whose text
// does not parse contributes nothing.
func (s *Scraper) finish(target string, rules *rules, a *answer) {
	if a.err != nil {
		return
	}
	families, err := s.parseWanted(target, a.text, rules.want)
	a.text = nil
	if err != nil {
		a.err = err
		return
	}
	part := NewSample(a.at)
	name := transport.URL(target) // a target's user info is never written
	err = rules.apply(families, name, &part)
	if err != nil && len(part.Hist)+len(part.Counter)+len(part.Gauge) == 0 {
		a.err = err
		return
	}
	if err != nil {
		part.Errors = append(part.Errors, fmt.Sprintf("%s: %v", name, err))
	}
	total := 0.0
	for _, p := range part.Parts {
		for _, v := range p.Counter {
			total += v
		}
	}
	s.watch.observe(target, name, a.seq, families, total)
	a.part = part
}
