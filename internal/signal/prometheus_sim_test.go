package signal_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/trace"
	"github.com/headroom-bench/headroom/internal/verdict"
	"github.com/prometheus/common/model"
)

// sideBySide is a sweep's metrics source that reads the same server two
// ways at each scrape: directly, and through Prometheus at the instant the
// direct scrape read it (the middle of that scrape, so the host's delays
// move both alike). The sweep is judged on what Prometheus gives.
type sideBySide struct {
	direct *signal.Scraper
	prom   *signal.Prometheus
	clock  *timescale.Clock

	mu     sync.Mutex
	pairs  []pair
	failed []string
}

// pair is one scrape read both ways, and the wall instant Prometheus was
// read at.
type pair struct {
	direct, prom signal.Sample
	wall         time.Time
}

func (s *sideBySide) Scrape(ctx context.Context, at time.Duration) (signal.Sample, error) {
	t0 := time.Now()
	d, err := s.direct.Scrape(ctx, at)
	mid := s.clock.At(t0.Add(time.Since(t0) / 2))
	if err != nil {
		return d, err
	}
	p, err := s.prom.Scrape(ctx, mid)
	if err != nil {
		if ctx.Err() == nil { // not the sweep ending its scrapes
			s.mu.Lock()
			s.failed = append(s.failed, err.Error())
			s.mu.Unlock()
		}
		return p, err
	}
	s.mu.Lock()
	s.pairs = append(s.pairs, pair{d, p, s.clock.Wall(mid)})
	s.mu.Unlock()
	return p, nil
}

// tee stands between Prometheus and the simulator's /metrics: it serves
// each scrape the simulator's page with a gauge headroom_test_scrape N added
// (N counting the scrapes from 0), and keeps every page it served as the
// simulator wrote it, so Prometheus' scrape with N is known byte for byte.
type tee struct {
	upstream string
	mu       sync.Mutex
	pages    [][]byte
}

func (t *tee) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp, err := http.Get(t.upstream)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		http.Error(w, fmt.Sprintf("HTTP %d, %v", resp.StatusCode, err), http.StatusBadGateway)
		return
	}
	t.mu.Lock()
	n := len(t.pages)
	t.pages = append(t.pages, page)
	t.mu.Unlock()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.Write(page)
	fmt.Fprintf(w, "# TYPE headroom_test_scrape gauge\nheadroom_test_scrape %d\n", n)
}

func (t *tee) page(n int) ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n < 0 || n >= len(t.pages) {
		return nil, false
	}
	return t.pages[n], true
}

// replayer serves one kept page at a time as a /metrics target, for a
// Scraper to read what Prometheus read.
type replayer struct {
	mu   sync.Mutex
	page []byte
}

func (r *replayer) set(page []byte) { r.mu.Lock(); r.page = page; r.mu.Unlock() }

func (r *replayer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write(r.page)
}

// scrapeTimes reads, from Prometheus, every scrape of job sim that worked
// (the source skips failed ones) and the tee's page number each holds.
func scrapeTimes(ctx context.Context, t *testing.T, prom *signal.Prometheus) (at []model.Time, page map[model.Time]int) {
	t.Helper()
	read := func(q string) model.Matrix {
		v, _, err := prom.API.Query(ctx, q, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		m, ok := v.(model.Matrix)
		if !ok || len(m) != 1 {
			t.Fatalf("%s: %v, want one series", q, v)
		}
		return m
	}
	page = map[model.Time]int{}
	for _, v := range read(`headroom_test_scrape{job="sim"}[10m]`)[0].Values {
		at = append(at, v.Timestamp)
		page[v.Timestamp] = int(v.Value)
	}
	failed := 0
	for _, v := range read(`up{job="sim"}[10m]`)[0].Values {
		if v.Value == 0 {
			failed++
		}
	}
	t.Logf("Prometheus scraped the tee %d times, %d of them failed", len(at)+failed, failed)
	return at, page
}

// nearestScrape is the index of the scrape of at (sorted) nearest t, ties
// to the earlier.
func nearestScrape(at []model.Time, t time.Time) int {
	k, _ := slices.BinarySearch(at, model.TimeFromUnixNano(t.UnixNano())+1)
	switch {
	case k == len(at):
		return k - 1
	case k > 0 && t.Sub(at[k-1].Time()) <= at[k].Time().Sub(t):
		return k - 1
	}
	return k
}

// sameSums reports how two samples' sums differ (counters, gauges,
// histograms), "" when they are the same to the bit.
func sameSums(a, b signal.Sample) string {
	var diffs []string
	if !reflect.DeepEqual(a.Counter, b.Counter) {
		diffs = append(diffs, fmt.Sprintf("counters %v against %v", a.Counter, b.Counter))
	}
	if !reflect.DeepEqual(a.Gauge, b.Gauge) {
		diffs = append(diffs, fmt.Sprintf("gauges %v against %v", a.Gauge, b.Gauge))
	}
	for name, h := range a.Hist {
		if !reflect.DeepEqual(h, b.Hist[name]) {
			diffs = append(diffs, fmt.Sprintf("histogram %s %+v against %+v", name, h, b.Hist[name]))
		}
	}
	for name := range b.Hist {
		if _, ok := a.Hist[name]; !ok {
			diffs = append(diffs, "histogram "+name+" only in the second")
		}
	}
	return strings.Join(diffs, "; ")
}

// partsKey is every part of a judged step, each value as the shortest text
// that reads back to the same float (NaN included): equal keys are equal
// judgements.
func partsKey(s sweep.StepResult) string {
	var b strings.Builder
	for _, p := range s.Judged.Parts {
		fmt.Fprintf(&b, "%s %s %v %v %v %q %q\n", p.Name, p.Verdict, p.Value.Center, p.Value.Lo, p.Value.Hi, p.Missing, p.Value.Warnings)
	}
	return b.String()
}

// stepLine is a judged step's verdict and parts, for the log.
func stepLine(s sweep.StepResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %d windows:", s.Judged.Verdict, s.Windows)
	for _, p := range s.Judged.Parts {
		fmt.Fprintf(&b, " %s %s %.4g [%.4g, %.4g];", p.Name, p.Verdict, p.Value.Center, p.Value.Lo, p.Value.Hi)
	}
	return b.String()
}

// TestPrometheusAndDirectScrapingAgree runs a short wall-clock sweep of the
// simulator (x10) judged through a real Prometheus scraping it, and reads
// the simulator directly at the same instants. Every step is judged again,
// after the sweep and on the same client records, three ways: on what
// Prometheus gave, on the pages Prometheus scraped (kept by a tee in front
// of the simulator, read by a Scraper), and on the direct reads.
//
//   - Through Prometheus against the pages it scraped: the same sample, to
//     the bit, at every instant (the scrape nearest it), so the same windows,
//     values, intervals and verdicts on every step. No allowance: whatever
//     Prometheus stores, labels or drops is read back as the page said.
//   - Through Prometheus against the direct reads: the same verdict on every
//     part of every step, but pass or fail against too close where the bar
//     lies between the two reads' interval bounds, the same number of
//     windows, and TTFT intervals that meet. That allowance is irreducible:
//     the first check shows that Prometheus gives exactly the page of its
//     scrape nearest each instant, and that scrape is up to half its
//     interval (here 1.15 modelled s) from the instant the direct read was
//     made, so a window through Prometheus holds the observations of edges
//     moved by up to that much, and the bootstrap's bounds move with them.
//     The test logs how far.
//   - No lag: over every scrape, the generation tokens the direct read is
//     ahead of Prometheus', over the rate they grow, is a quarter of
//     Prometheus' interval at most (an instant query, the last scrape before
//     each instant, lags by half of it on average and never leads).
//
// Prometheus scrapes on a period that does not divide the sweep's, so the
// instants fall at every phase of it. Before the re-judging on the same
// records, the step the sweep judged live (on the records it had when the
// step ended, some turns still in flight) was set against one re-judged
// later: their errors parts differed with the same error counts (a Wilson
// bound of 0.086 against 0.139), a difference of records, not of sources.
func TestPrometheusAndDirectScrapingAgree(t *testing.T) {
	bin := "/usr/bin/prometheus"
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("prometheus"); err != nil {
			t.Skip("prometheus binary not found (/usr/bin/prometheus or on PATH): apt-get install -y prometheus to run this test")
		}
	}
	if testing.Short() {
		t.Skip("starts a Prometheus server and a wall-clock sweep")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	const scale = 10
	profile := sim.DefaultProfile()
	s, err := sim.New(sim.Options{Profile: profile, Scale: scale, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pages := &tee{upstream: endpoint + "/metrics"}
	teeSrv := httptest.NewServer(pages)
	defer teeSrv.Close()
	// Prometheus every 230 ms of wall time (2.3 modelled s), the sweep every
	// 500 ms (5 s): the interval under sweep.scrape_s, as the docs ask, and
	// not a divisor of it. A read through Prometheus is then up to 1.15
	// modelled s off the instant, so windows are 15 s: the cross-check of
	// the server's TTFT count against the client's first tokens in each
	// window holds either way.
	const interval = 0.230 // Prometheus' scrape interval, wall seconds
	promURL := startPrometheusAt(t, ctx, bin, "230ms", strings.TrimPrefix(teeSrv.URL, "http://"))

	clock, err := timescale.New(scale)
	if err != nil {
		t.Fatal(err)
	}
	prom, err := signal.NewPrometheus(promURL, `{job="sim"}`, signal.VLLM(), clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &sideBySide{direct: &signal.Scraper{Targets: []string{endpoint + "/metrics"}, Mapping: signal.VLLM()}, prom: prom, clock: clock}
	// The simulator's HTTP counters appear with a first request.
	if resp, err := http.Get(endpoint + "/v1/models"); err == nil {
		resp.Body.Close()
	}
	for {
		if s, err := prom.Scrape(ctx, clock.Now()); err == nil && len(s.Counter) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("Prometheus never scraped the simulator")
		}
		time.Sleep(100 * time.Millisecond)
	}

	traces := trace.Synthesize(trace.SynthOptions{Sessions: 32, Seed: 1, HeavyShare: -1, MaxThink: 5})
	heavy, light := trace.Tiers(traces)
	tiers := map[string][]load.Session{}
	for tier, ts := range map[string][]trace.Trace{"heavy": heavy, "light": light} {
		for _, tr := range ts {
			tiers[tier] = append(tiers[tier], load.Session{ID: tr.ID, Tier: tier, Turns: tr.Turns()})
		}
	}
	book := sweep.NewBook(nil)
	gen := load.NewGenerator(load.Options{
		Client: load.NewClient(endpoint, profile.Model), Clock: clock, Tiers: tiers,
		Mix:     []load.TierShare{{Tier: "heavy", Share: 0.5}, {Tier: "light", Share: 0.5}},
		Prompts: prompt.Builder{Seed: 1, BlockSize: prompt.DefaultBlockSize}, ThinkTime: load.ThinkRecorded,
		Timeout: 10 * time.Minute, Seed: 1, Sink: book.Add, OnSend: book.Sent,
	})
	bar := config.Default().Bar
	opts := verdict.DefaultOptions()
	plan := sweep.Plan{
		Ladder: []int{4, 8, 16}, Warmup: 40 * time.Second, Step: 90 * time.Second,
		Window: 15 * time.Second, Scrape: 5 * time.Second, Drain: 30 * time.Second,
		// The errors part reads the load's records, the same either way; at
		// the default 2% it is too close on these few turns at every step
		// and would hide the parts that read the metrics.
		Bar:     verdict.Bar{TTFTP90: bar.TTFTP90S, InteractivityP90: bar.InteractivityP90TPS, ErrorRate: 0.5},
		Options: opts,
	}
	var progress strings.Builder
	runner := &sweep.Runner{Plan: plan, Clock: clock, Load: gen, Source: src, Book: book, Progress: &progress}
	res, err := runner.Run(ctx)
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, progress.String())
	}
	src.mu.Lock()
	pairs, failed := src.pairs, src.failed
	src.mu.Unlock()
	if len(failed) > 0 {
		t.Errorf("%d reads through Prometheus failed, the first: %s", len(failed), failed[0])
	}
	if len(res.Steps) < 2 {
		t.Fatalf("%d steps judged, want at least 2:\n%s", len(res.Steps), progress.String())
	}

	// the pages Prometheus read at each instant, read again by a Scraper
	scrapes, pageAt := scrapeTimes(ctx, t, prom)
	replay := &replayer{}
	replaySrv := httptest.NewServer(replay)
	defer replaySrv.Close()
	replayScraper := &signal.Scraper{Targets: []string{replaySrv.URL + "/metrics"}, Mapping: signal.VLLM()}
	direct, viaProm, scraped := make([]signal.Sample, len(pairs)), make([]signal.Sample, len(pairs)), make([]signal.Sample, len(pairs))
	var offsets []float64 // modelled seconds from each instant to the scrape Prometheus gave
	unequal := 0
	for i, p := range pairs {
		direct[i], viaProm[i] = p.direct, p.prom
		k := nearestScrape(scrapes, p.wall)
		at := scrapes[k]
		offsets = append(offsets, float64(at.Time().Sub(p.wall))/float64(time.Second)*scale)
		n, ok := pageAt[at]
		page, kept := pages.page(n)
		if !ok || !kept {
			t.Fatalf("instant %d (%v): Prometheus' nearest scrape at %v holds no page of the tee (page %d, %v)", i, p.prom.At, at.Time(), n, ok)
		}
		replay.set(page)
		got, err := replayScraper.Scrape(ctx, p.prom.At)
		if err != nil {
			t.Fatal(err)
		}
		scraped[i] = got
		if d := sameSums(p.prom, got); d != "" {
			if unequal++; unequal <= 3 {
				t.Errorf("instant %d (%v): through Prometheus and the page it scraped differ: %s", i, p.prom.At, d)
			}
			for j := max(0, k-3); j < min(len(scrapes), k+4); j++ {
				pg, _ := pages.page(pageAt[scrapes[j]])
				replay.set(pg)
				other, _ := replayScraper.Scrape(ctx, p.prom.At)
				t.Logf("instant %d at %s: scrape %d at %s (page %d, %+.3f s from the instant) same as Prometheus' read: %v",
					i, p.wall.Format("15:04:05.000000"), j, scrapes[j].Time().Format("15:04:05.000"), pageAt[scrapes[j]], scrapes[j].Time().Sub(p.wall).Seconds(), sameSums(p.prom, other) == "")
			}
		}
	}
	if unequal > 3 {
		t.Errorf("%d of %d instants differ between Prometheus and the pages it scraped", unequal, len(pairs))
	}
	slices.SortFunc(offsets, func(a, b float64) int { return cmp.Compare(math.Abs(a), math.Abs(b)) })
	t.Logf("%d instants: Prometheus' nearest scrape lies %.2f modelled s from the instant at the median, %.2f at most (half its interval: %.2f)",
		len(offsets), math.Abs(offsets[len(offsets)/2]), math.Abs(offsets[len(offsets)-1]), interval/2*scale)

	mismatches := 0
	for _, st := range res.Steps {
		records := book.Step(st.Index, load.PhaseMeasure)
		p := sweep.JudgeStep(plan, st, viaProm, records)
		r := sweep.JudgeStep(plan, st, scraped, records)
		d := sweep.JudgeStep(plan, st, direct, records)
		t.Logf("step %d, %d sessions: live       %s", st.Index, st.Sessions, stepLine(st))
		t.Logf("step %d, %d sessions: prometheus %s", st.Index, st.Sessions, stepLine(p))
		t.Logf("step %d, %d sessions: its pages  %s", st.Index, st.Sessions, stepLine(r))
		t.Logf("step %d, %d sessions: direct     %s", st.Index, st.Sessions, stepLine(d))
		if p.Windows != r.Windows || partsKey(p) != partsKey(r) || p.Judged.Verdict != r.Judged.Verdict {
			t.Errorf("step %d: judged through Prometheus and on the pages it scraped differ:\n  %s\n  %s", st.Index, stepLine(p), stepLine(r))
		}
		if p.Windows != d.Windows {
			t.Errorf("step %d: %d windows through Prometheus, %d directly", st.Index, p.Windows, d.Windows)
		}
		explained := false
		for i, pp := range p.Judged.Parts {
			q := d.Judged.Parts[i]
			if pp.Name == verdict.PartTTFT && pp.Verdict != verdict.NoData && (pp.Value.Lo > q.Value.Hi || q.Value.Lo > pp.Value.Hi) {
				t.Errorf("step %d: TTFT P90 %.3g [%.3g, %.3g] through Prometheus, %.3g [%.3g, %.3g] directly: the intervals do not meet",
					st.Index, pp.Value.Center, pp.Value.Lo, pp.Value.Hi, q.Value.Center, q.Value.Lo, q.Value.Hi)
			}
			if pp.Verdict == q.Verdict {
				continue
			}
			// Pass or fail against too close, with the bar between the two
			// reads' lower bounds or their upper bounds, is edges a
			// Prometheus scrape apart (irreducible, see above); no data
			// against a verdict, or pass against fail, is a source that
			// disagrees.
			between := func(a, b float64) bool { return min(a, b) <= pp.Bar && pp.Bar <= max(a, b) }
			decided := func(v verdict.Verdict) bool { return v == verdict.Pass || v == verdict.Fail }
			if (decided(pp.Verdict) != decided(q.Verdict)) && pp.Verdict != verdict.NoData && q.Verdict != verdict.NoData &&
				(between(pp.Value.Lo, q.Value.Lo) || between(pp.Value.Hi, q.Value.Hi)) {
				explained = true
				mismatches++
				t.Logf("step %d, %s: %s through Prometheus, %s directly: the bar %g lies between their bounds", st.Index, pp.Name, pp.Verdict, q.Verdict, pp.Bar)
				continue
			}
			t.Errorf("step %d, %s: %s through Prometheus (missing %v, %q; step warnings %q), %s directly (missing %v, %q)", st.Index, pp.Name, pp.Verdict, pp.Missing, pp.Value.Warnings, p.Judged.Warnings, q.Verdict, q.Missing, q.Value.Warnings)
		}
		if p.Judged.Verdict != d.Judged.Verdict && !explained {
			t.Errorf("step %d (%d sessions): %s through Prometheus, %s scraped directly", st.Index, st.Sessions, stepLine(p), stepLine(d))
		}
	}
	t.Logf("%d parts of %d steps read pass or fail one way and too close the other, the bar between their bounds", mismatches, len(res.Steps))

	// The lag, in wall seconds: sum over scrapes of (direct - Prometheus)
	// generation tokens, over the sum of the rate they grow at (from the
	// direct scrapes either side).
	ahead, rate := 0.0, 0.0
	for i := 1; i+1 < len(pairs); i++ {
		span := (pairs[i+1].direct.At - pairs[i-1].direct.At).Seconds() / scale
		if span <= 0 {
			continue
		}
		ahead += pairs[i].direct.Counter[signal.GenerationTokens] - pairs[i].prom.Counter[signal.GenerationTokens]
		rate += (pairs[i+1].direct.Counter[signal.GenerationTokens] - pairs[i-1].direct.Counter[signal.GenerationTokens]) / span
	}
	if rate <= 0 {
		t.Fatal("no generation tokens counted")
	}
	lag := ahead / rate
	t.Logf("%d scrapes: Prometheus lags the direct reads by %.3f wall s on average (its interval %.3f s)", len(pairs), lag, interval)
	if math.Abs(lag) > interval/4 {
		t.Errorf("Prometheus lags the direct reads by %.3f s on average, more than a quarter of its %.3f s interval: a read at an instant is not the scrape nearest it", lag, interval)
	}
}

// startPrometheusAt starts Debian's prometheus scraping targets every
// interval under job "sim" and returns its URL once ready.
func startPrometheusAt(t *testing.T, ctx context.Context, bin, interval string, targets ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	conf := fmt.Sprintf("global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n  - job_name: sim\n    static_configs:\n      - targets: [%q]\n", interval, interval, strings.Join(targets, `", "`))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(pctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+addr, "--log.level=warn")
	var logs strings.Builder
	var mu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&logs, &mu}, lockedWriter{&logs, &mu}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	for {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return "http://" + addr
			}
		}
		select {
		case <-ctx.Done():
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("Prometheus never became ready:\n%s", logs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type lockedWriter struct {
	b  *strings.Builder
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
