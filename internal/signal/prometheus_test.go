package signal

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/headroom-bench/headroom/internal/timescale"
)

// vectorOf turns exposition text into the instant vector Prometheus would
// answer after scraping it, with extra target labels.
func vectorOf(t *testing.T, text string, extra model.LabelSet) model.Vector {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var out model.Vector
	add := func(name string, labels model.LabelSet, v float64) {
		m := model.Metric{model.MetricNameLabel: model.LabelValue(name)}
		for k, v := range extra {
			m[k] = v
		}
		for k, v := range labels {
			m[k] = v
		}
		out = append(out, &model.Sample{Metric: m, Value: model.SampleValue(v)})
	}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := model.LabelSet{}
			for _, lp := range m.GetLabel() {
				labels[model.LabelName(lp.GetName())] = model.LabelValue(lp.GetValue())
			}
			if h := m.GetHistogram(); h != nil {
				for _, b := range h.GetBucket() {
					bl := labels.Clone()
					bl[model.BucketLabel] = model.LabelValue(strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
					add(name+"_bucket", bl, float64(b.GetCumulativeCount()))
				}
				add(name+"_count", labels, float64(h.GetSampleCount()))
				add(name+"_sum", labels, h.GetSampleSum())
				continue
			}
			v, _ := valueOf(m, "")
			add(name, labels, v)
		}
	}
	return out
}

// fakeQuerier answers as a Prometheus that scraped vec's targets at each of
// times: an instant query with vec, a range selector with vec's series
// (and an up series of 1 for each target without one) at every time.
type fakeQuerier struct {
	vec     model.Vector
	times   []time.Time
	queries []string
}

func (f *fakeQuerier) Query(_ context.Context, q string, _ time.Time) (model.Value, []string, error) {
	f.queries = append(f.queries, q)
	if !strings.HasSuffix(q, "ms]") {
		return f.vec, nil, nil
	}
	var m model.Matrix
	add := func(metric model.Metric, v model.SampleValue) {
		ss := &model.SampleStream{Metric: metric}
		for _, t := range f.times {
			ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(t.UnixNano()), Value: v})
		}
		m = append(m, ss)
	}
	up := map[targetKey]bool{}
	for _, s := range f.vec {
		if s.Metric[model.MetricNameLabel] == "up" {
			up[targetOf(s.Metric)] = true
		}
	}
	for _, s := range f.vec {
		k := targetOf(s.Metric)
		if !up[k] {
			up[k] = true
			add(model.Metric{model.MetricNameLabel: "up", "job": k[0], "instance": k[1]}, 1)
		}
		if strings.HasPrefix(q, "up") && s.Metric[model.MetricNameLabel] != "up" {
			continue
		}
		add(s.Metric, s.Value)
	}
	return m, nil, nil
}

// TestPrometheusMapsLikeParse feeds the Prometheus source what Prometheus
// answers after scraping the vLLM test exposition from one target, and checks
// it gives the same sample as parsing the exposition.
func TestPrometheusMapsLikeParse(t *testing.T) {
	text := string(readTestdata(t))
	direct := NewSample(0)
	if err := VLLM().Parse(strings.NewReader(text), &direct); err != nil {
		t.Fatal(err)
	}
	vec := vectorOf(t, text, model.LabelSet{"job": "vllm", "instance": "10.0.0.1:8000"})
	vec = append(vec, &model.Sample{Metric: model.Metric{"__name__": "up", "job": "vllm", "instance": "10.0.0.2:8000"}, Value: 0})
	clock, _ := timescale.New(1)
	w := clock.Wall(7 * time.Second)
	f := &fakeQuerier{vec: vec, times: []time.Time{w.Add(-time.Second), w.Add(400 * time.Millisecond)}}
	p := &Prometheus{API: f, Selector: `{job="vllm"}`, Mapping: VLLM(), Clock: clock}
	s, err := p.Scrape(context.Background(), 7*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// the sample is the scrape nearest 7 s, made at 7.4 s (to Prometheus'
	// millisecond), and carries that time
	if n := len(f.queries); s.At <= 7399*time.Millisecond || s.At > 7400*time.Millisecond || n != 2 || !strings.HasPrefix(f.queries[0], `up{job="vllm"}[`) ||
		!strings.Contains(f.queries[n-1], `,job="vllm"}[`) || !strings.HasPrefix(f.queries[n-1], `{__name__=~"up|`) {
		t.Errorf("at %v, queries %q", s.At, f.queries)
	}
	for name, v := range direct.Counter {
		if s.Counter[name] != v {
			t.Errorf("counter %s = %g, parse gives %g", name, s.Counter[name], v)
		}
	}
	for name, v := range direct.Gauge {
		if s.Gauge[name] != v {
			t.Errorf("gauge %s = %g, parse gives %g", name, s.Gauge[name], v)
		}
	}
	for name, h := range direct.Hist {
		g := s.Hist[name]
		if !g.SameBounds(h) || g.Count != h.Count || math.Abs(g.Sum-h.Sum) > 1e-9 || fmt.Sprint(g.Cumulative) != fmt.Sprint(h.Cumulative) {
			t.Errorf("histogram %s = %+v, parse gives %+v", name, g, h)
		}
	}
	if len(s.Parts) != len(direct.Parts) {
		t.Errorf("%d parts, parse gives %d", len(s.Parts), len(direct.Parts))
	}
	if len(s.Errors) != 1 || !strings.Contains(s.Errors[0], "10.0.0.2:8000") {
		t.Errorf("errors %q, want the target with up == 0", s.Errors)
	}
	f.vec = nil
	if _, err := p.Scrape(context.Background(), 0); err == nil {
		t.Error("a query matching nothing gave no error")
	}
}

func TestSelector(t *testing.T) {
	cases := []struct {
		sel string // a selector
		ok  bool
	}{
		{"", true},             // every series
		{`{job="vllm"}`, true}, // one matcher
		{`{job="vllm", namespace=~"llm-.*"}`, true}, // several, regex
		{`{pod!="a,b",x!~"y\"z"}`, true},            // commas and escaped quotes inside values
		{`job="vllm"`, false},                       // no braces
		{`{job=vllm}`, false},                       // unquoted value
		{`{job="vllm"} or up`, false},               // not a selector
	}
	for _, c := range cases {
		if _, err := matchersOf(c.sel); (err == nil) != c.ok {
			t.Errorf("selector %q: error %v, want ok %v", c.sel, err, c.ok)
		}
	}
}

// copyState is one engine copy's counters: n requests with a TTFT spread
// over the buckets, slower on a slow copy; a copy that is gone answers 503.
type copyState struct {
	n    int
	slow bool
	gone bool
}

func (c copyState) exposition() string {
	var b strings.Builder
	n := float64(c.n)
	fmt.Fprintf(&b, "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{engine=\"0\"} %g\n", 1000*n)
	fmt.Fprintf(&b, "# TYPE vllm:request_success_total counter\nvllm:request_success_total{engine=\"0\",finished_reason=\"stop\"} %g\n", n)
	fmt.Fprintf(&b, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 3\n")
	b.WriteString("# HELP vllm:num_preemptions_total Preemptions.\n# TYPE vllm:num_preemptions_total counter\n") // no series yet
	b.WriteString("# TYPE vllm:time_to_first_token_seconds histogram\n")
	for i, le := range []string{"0.25", "0.5", "1.0", "2.5", "+Inf"} {
		frac := []float64{0.2, 0.5, 0.8, 0.95, 1}[i]
		if c.slow {
			frac = []float64{0.1, 0.3, 0.6, 0.92, 1}[i]
		}
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=%q} %g\n", le, math.Round(frac*n))
	}
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_count{engine=\"0\"} %g\nvllm:time_to_first_token_seconds_sum{engine=\"0\"} %g\n", n, 0.7*n)
	return b.String()
}

// TestRealPrometheus starts a Prometheus server (Debian's prometheus
// package) that scrapes three vLLM-format copies every second while the
// test steps their counters, one copy restarting and one going away (as a
// pod that is gone); then it checks that the direct Scraper, Prometheus
// instant queries and one Prometheus range query give the same window
// deltas, P90 and restart warning, and that pre-flight reads the same
// families through Prometheus as from the copies themselves.
func TestRealPrometheus(t *testing.T) {
	bin := "/usr/bin/prometheus"
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("prometheus"); err != nil {
			t.Skip("prometheus binary not found (/usr/bin/prometheus or on PATH): apt-get install -y prometheus to run this test")
		}
	}
	if testing.Short() {
		t.Skip("starts a Prometheus server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var mu sync.Mutex
	states := map[string]copyState{}
	serve := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			st := states[name]
			mu.Unlock()
			if st.gone {
				http.Error(w, "gone", http.StatusServiceUnavailable)
				return
			}
			text := st.exposition()
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprint(w, text)
		}))
	}
	a, b, c := serve("a"), serve("b"), serve("c")
	defer a.Close()
	defer b.Close()
	defer c.Close()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: [%q, %q, %q]\n", host(a), host(b), host(c))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	waitFor(t, ctx, "Prometheus to be ready", func() bool {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, &logs)

	clock, _ := timescale.New(1)
	prom, err := NewPrometheus("http://"+addr, `{job="vllm"}`, VLLM(), clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	scraper := &Scraper{Targets: []string{a.URL + "/metrics", b.URL + "/metrics", c.URL + "/metrics"}, Mapping: VLLM()}

	// Copy a restarts between steps 1 and 2 while b's growth hides it; copy
	// c is gone from step 2 on (n < 0).
	steps := [][3]int{{100, 100, 50}, {160, 180, 70}, {20, 400, -1}, {60, 460, -1}}
	var edges []time.Duration
	var direct []Sample
	for _, st := range steps {
		mu.Lock()
		states["a"], states["b"], states["c"] = copyState{n: st[0]}, copyState{n: st[1], slow: true}, copyState{n: st[2], gone: st[2] < 0}
		mu.Unlock()
		want, parts := float64(st[0]+st[1]), 2
		if st[2] >= 0 {
			want, parts = want+float64(st[2]), 3
		}
		waitFor(t, ctx, fmt.Sprintf("Prometheus to scrape %v", st), func() bool {
			s, err := prom.Scrape(ctx, clock.Now())
			return err == nil && s.Counter[RequestsOK] == want && len(s.Parts) == parts
		}, &logs)
		time.Sleep(300 * time.Millisecond) // range points near the edge come after the scrape seen
		at := clock.Now()
		if st[2] == 70 {
			checkFamilies(t, ctx, prom, scraper, at)
		}
		s, err := scraper.Scrape(ctx, at)
		if err != nil || s.Counter[RequestsOK] != want {
			t.Fatalf("direct scrape at %v: %v, requests_ok %g, want %g", at, err, s.Counter[RequestsOK], want)
		}
		edges, direct = append(edges, at), append(direct, s)
		time.Sleep(time.Second) // hold the state past the edge: a read at it may take the scrape after it
	}
	var instant []Sample
	for _, at := range edges {
		s, err := prom.Scrape(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		instant = append(instant, s)
	}
	dense, err := prom.Samples(ctx, edges[0]-time.Second, edges[len(edges)-1]+100*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// The range read's sample nearest each edge, as the other two have one
	// sample an edge: between edges these copies' counters hold still, and
	// a restart seen between samples that show no growth reads as a series
	// that shrank (Windows' restart bound).
	var ranged []Sample
	for _, at := range edges {
		best := dense[0]
		for _, s := range dense {
			if (s.At - at).Abs() < (best.At - at).Abs() {
				best = s
			}
		}
		ranged = append(ranged, best)
	}

	wantOK := []float64{160, 240, 100} // per window: a 60 + b 80 + c 20; a 20 from zero + b 220 (c gone); 40 + 60
	for i := range len(edges) - 1 {
		var got []string
		for _, src := range []struct {
			name    string
			samples []Sample
		}{{"scraper", direct}, {"prometheus instant", instant}, {"prometheus range", ranged}} {
			ws := Windows(src.samples, edges[i], edges[i+1], 0)
			if len(ws) != 1 {
				t.Fatalf("%s: %d windows between %v and %v", src.name, len(ws), edges[i], edges[i+1])
			}
			w := ws[0]
			v, lo, hi, ok := w.Hist[TTFT].Quantile(0.9)
			restart := strings.Contains(strings.Join(w.Warnings, "\n"), "went down")
			line := fmt.Sprintf("requests_ok %g, prompt_tokens %g, ttft count %g, P90 %.4g in [%g, %g] %v, restart warned %v",
				w.Counter[RequestsOK], w.Counter[PromptTokens], w.Hist[TTFT].Count, v, lo, hi, ok, restart)
			got = append(got, line)
			if w.Counter[RequestsOK] != wantOK[i] || w.Hist[TTFT].Count != wantOK[i] || restart != (i == 1) {
				t.Errorf("window %d, %s: %s; want %g requests, restart warned %v (warnings %q)", i, src.name, line, wantOK[i], i == 1, w.Warnings)
			}
		}
		t.Logf("window %d: %s", i, got[0])
		if got[0] != got[1] || got[0] != got[2] {
			t.Errorf("window %d: sources disagree:\n scraper: %s\n instant: %s\n range:   %s", i, got[0], got[1], got[2])
		}
	}
}

// checkFamilies compares the families pre-flight reads through Prometheus
// at run time at with those of the copies themselves: the same families,
// series and values (Prometheus adds instance and job labels), and the
// engine told from the family names.
func checkFamilies(t *testing.T, ctx context.Context, prom *Prometheus, scraper *Scraper, at time.Duration) {
	t.Helper()
	fams, down, err := prom.Families(ctx, at)
	if err != nil || len(down) > 0 {
		t.Fatalf("families through Prometheus: %v, down %q", err, down)
	}
	direct, err := scraper.Families(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range VLLM().Families() {
		series, sum := 0, 0.0
		for _, d := range direct {
			for _, m := range d[name].GetMetric() {
				series++
				if v, ok := valueOf(m, ""); ok {
					sum += v
				}
				if h := m.GetHistogram(); h != nil {
					sum += float64(h.GetSampleCount())
				}
			}
		}
		got, gotSum := 0, 0.0
		for _, m := range fams[name].GetMetric() {
			got++
			if v, ok := valueOf(m, ""); ok {
				gotSum += v
			}
			if h := m.GetHistogram(); h != nil {
				gotSum += h.GetSampleCountFloat()
				if len(h.GetBucket()) != 5 {
					t.Errorf("%s through Prometheus: %d buckets, want 5", name, len(h.GetBucket()))
				}
			}
			if !hasLabel(m, "instance") {
				t.Errorf("%s through Prometheus: a series without its instance label", name)
			}
		}
		if got != series || gotSum != sum {
			t.Errorf("%s: %d series summing to %g through Prometheus, %d summing to %g from the copies", name, got, gotSum, series, sum)
		}
		if d := direct[0][name]; d != nil && fams[name].GetType() != d.GetType() {
			t.Errorf("%s: type %s through Prometheus, %s from the copies", name, fams[name].GetType(), d.GetType())
		}
	}
	// A counter family exposed with no series reads as zero both ways.
	if mf, ok := fams["vllm:num_preemptions_total"]; !ok || len(mf.GetMetric()) != 0 || mf.GetType() != dto.MetricType_COUNTER {
		t.Errorf("the preemption counter without series through Prometheus: %v, want an empty counter family", mf)
	}
	s, err := prom.Scrape(ctx, at)
	if v, ok := s.Counter[Preemptions]; err != nil || !ok || v != 0 {
		t.Errorf("preemptions through Prometheus: %g, present %v, %v; want 0, present", v, ok, err)
	}
	names, err := prom.FamilyNames(ctx, at, "vllm:.+|sglang:.+")
	// Prometheus stores a histogram as its _bucket, _count and _sum series.
	if err != nil || len(names) != 6 || !strings.HasPrefix(names[0], "vllm:") || !strings.HasPrefix(names[5], "vllm:") {
		t.Errorf("engine series names through Prometheus: %q, %v; want the 6 vllm: names", names, err)
	}
}

func hasLabel(m *dto.Metric, name string) bool {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return true
		}
	}
	return false
}

// waitFor polls cond every 100ms until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool, logs *lockedBuffer) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; prometheus said:\n%s", what, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lockedBuffer collects a child process's output while the test may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
