package calibrate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
)

func TestFitNonNegative(t *testing.T) {
	// y = 2 a + 3 c exactly, b unused
	var x [][]float64
	var y []float64
	for i := range 20 {
		a, b, c := float64(i%7), float64(i%3), float64(i%5)
		x = append(x, []float64{a, b, c})
		y = append(y, 2*a+3*c)
	}
	s, err := fitNonNegative(x, y)
	if err != nil {
		t.Fatal(err)
	}
	for j, want := range []float64{2, 0, 3} {
		if math.Abs(s.coef[j]-want) > 1e-9 {
			t.Errorf("coef %d = %g, want %g", j, s.coef[j], want)
		}
	}
	// y = a - b: the unconstrained fit wants b negative; b is held at 0
	x, y = nil, nil
	for i := range 20 {
		a, b := float64(i), float64(i%4)
		x = append(x, []float64{a, b})
		y = append(y, a-b)
	}
	if s, err = fitNonNegative(x, y); err != nil {
		t.Fatal(err)
	}
	if s.coef[1] != 0 || s.coef[0] <= 0 {
		t.Errorf("coefs %v: want b held at 0 and a positive", s.coef)
	}
}

// TestArrivalsMoveOnlyWhenIdle: the client's gap before the engine sees a
// request is taken off only when nothing else was in flight; while the
// engine is busy its iterations go on through the gap.
func TestArrivalsMoveOnlyWhenIdle(t *testing.T) {
	rec := func(lane int, send, first, last float64) load.Record {
		return load.Record{V: load.RecordVersion, Lane: lane, Send: send, FirstToken: first, LastToken: last, ServedPromptTokens: 1000, OutputTokens: 10, Status: 200}
	}
	recs := []load.Record{
		rec(0, 0, 1, 2),   // idle engine: moved by the gap
		rec(1, 1.5, 3, 4), // sent while lane 0 decodes: not moved
		rec(0, 10, 10.05, 11),
		{V: load.RecordVersion, Send: 3, Error: load.ErrTimeout}, // failed: left out, counted
	}
	spans, skipped := spansOf(recs, func(int) float64 { return 0.2 })
	if skipped != 1 || len(spans) != 3 {
		t.Fatalf("%d spans, %d skipped; want 3 and 1", len(spans), skipped)
	}
	if spans[0].arrive != 0.2 || spans[1].arrive != 1.5 {
		t.Errorf("arrivals %g, %g: want 0.2 (idle) and 1.5 (busy)", spans[0].arrive, spans[1].arrive)
	}
	if spans[2].arrive != 10.05 {
		t.Errorf("arrival %g: the gap may not move an arrival past its first token (10.05)", spans[2].arrive)
	}
	// first come first served: lane 1's prompt is computed after lane 0's first token
	if spans[1].prefillStart != 1.5 {
		t.Errorf("prefill start %g, want 1.5 (lane 0 had its first token at 1)", spans[1].prefillStart)
	}
}

// TestWorkInAddsUp: the work of a request cut into windows sums to its
// whole, and lands where it was done.
func TestWorkInAddsUp(t *testing.T) {
	spans := []span{{arrive: 0, prefillStart: 0, first: 2, last: 12, prompt: 5000, cached: 1000, output: 101}}
	whole := workIn(spans, -1, 20, 8192, nil)
	if whole.prefill != 4000 || whole.decodeTokens != 100 {
		t.Errorf("whole: prefill %g, decode %g; want 4000 and 100", whole.prefill, whole.decodeTokens)
	}
	// pairs: 4000 new tokens on a 1000-token prefix
	if want := 4000 * (1000 + 2000.0); math.Abs(whole.pairs-want) > 1e-6 {
		t.Errorf("pairs %g, want %g", whole.pairs, want)
	}
	a, b := workIn(spans, -1, 7, 8192, nil), workIn(spans, 7, 20, 8192, nil)
	if math.Abs(a.decodeContext+b.decodeContext-whole.decodeContext) > 1e-6 || a.decodeTokens != 50 {
		t.Errorf("halves: context %g + %g of %g, first half %g tokens (want 50)", a.decodeContext, b.decodeContext, whole.decodeContext, a.decodeTokens)
	}
	if p := workIn(spans, 1, 2, 8192, nil).prefill; p != 2000 {
		t.Errorf("prefill in the second half of its stretch %g, want 2000", p)
	}
}

// TestResidentSharesALanesPrefix: a parent and its subagent in flight
// together hold their common cached prefix once.
func TestResidentSharesALanesPrefix(t *testing.T) {
	spans := []span{
		{arrive: 0, prefillStart: 0, first: 1, last: 10, prompt: 3200, cached: 3200, output: 10, lane: 0},
		{arrive: 0, prefillStart: 0, first: 1, last: 10, prompt: 4800, cached: 1600, output: 10, lane: 0},
		{arrive: 0, prefillStart: 0, first: 1, last: 10, prompt: 1600, cached: 0, output: 10, lane: 1},
	}
	// at 5.5: each decoded half its 9 tokens; lane 0 shares 1600 tokens
	got := resident(spans, 5.5, 16)
	want := 0.0
	for _, p := range []int{3200, 4800, 1600} {
		want += math.Ceil((float64(p)+4.5+1)/16) * 16
	}
	want -= 1600
	if got != want {
		t.Errorf("resident %g, want %g", got, want)
	}
}

func TestLimitsFromArgs(t *testing.T) {
	cases := []struct {
		args  []string
		flags []string
		want  int
	}{
		{[]string{"--max-num-seqs", "64"}, []string{"--max-num-seqs"}, 64},
		{[]string{"--tp", "8", "--max-num-seqs=32"}, []string{"--max-num-seqs"}, 32},
		{[]string{"--chunked-prefill-size", "4096"}, []string{"--max-num-batched-tokens", "--chunked-prefill-size"}, 4096}, // SGLang's name
		{[]string{"--max-num-seqs"}, []string{"--max-num-seqs"}, 0},                                                        // no value
		{[]string{"--max-num-seqs", "many"}, []string{"--max-num-seqs"}, 0},                                                // not a number
	}
	for _, c := range cases {
		if got, _, _ := intArg(c.args, c.flags...); got != c.want {
			t.Errorf("intArg(%v, %v) = %d, want %d", c.args, c.flags, got, c.want)
		}
	}
}

func TestBlockOf(t *testing.T) {
	run := func(cached ...int) Run {
		var r Run
		for i := 0; i < 25; i++ {
			r.Records = append(r.Records, load.Record{CachedTokens: cached[i%len(cached)]})
		}
		return r
	}
	if b, _ := blockOf([]Run{run(32, 48, 160)}); b != 16 {
		t.Errorf("block %d from multiples of 16, want 16", b)
	}
	if b, _ := blockOf([]Run{run(33, 48)}); b != 0 {
		t.Errorf("block %d from counts of single tokens (SGLang's radix cache), want 0 (not fitted)", b)
	}
	if b, _ := blockOf([]Run{{Records: []load.Record{{CachedTokens: 64}}}}); b != 0 {
		t.Errorf("block %d from one count, want 0 (too few)", b)
	}
}

// realRun is a run directory's config as a real endpoint's run writes it.
func realRun(t *testing.T) Run {
	t.Helper()
	cfg := config.Default()
	cfg.Recipe.Endpoint, cfg.Recipe.Metrics, cfg.TimeScale = "http://10.0.0.5:8000", []string{"http://10.0.0.5:8000/metrics"}, 1
	cfg.Recipe.Sim.Profile = ""
	cfg.Recipe.APIKeyEnv = "VLLM_KEY"
	cfg.Notify.Webhook = "http://127.0.0.1:9/hook"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return Run{Dir: "runs/r/1", Config: cfg}
}

func TestPredictConfig(t *testing.T) {
	r := realRun(t)
	cfg, err := PredictConfig(r, "fitted.yaml", "vllm", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.Recipe
	switch {
	case rc.Endpoint != config.SimEndpoint || len(rc.Metrics) != 0:
		t.Errorf("endpoint %q metrics %v: want the simulator's", rc.Endpoint, rc.Metrics)
	case !strings.HasSuffix(rc.Sim.Profile, "fitted.yaml") || !strings.HasPrefix(rc.Sim.Profile, "/"):
		t.Errorf("sim profile %q: want the fitted file's absolute path", rc.Sim.Profile)
	case rc.APIKeyEnv != "" || cfg.Notify.Webhook != "" || len(cfg.Evals.Suites) != 0:
		t.Errorf("key %q, webhook %q, evals %v: a prediction needs none", rc.APIKeyEnv, cfg.Notify.Webhook, cfg.Evals.Suites)
	case rc.Name != r.Config.Recipe.Name+"-predicted":
		t.Errorf("recipe name %q", rc.Name)
	}
	if cfg.Sweep.StepS != r.Config.Sweep.StepS || cfg.Workload.Seed != r.Config.Workload.Seed || cfg.Bar != r.Config.Bar {
		t.Error("the prediction changed the sweep, the workload's seed or the bar")
	}
}

// TestPredictConfigWithoutGPUs: a flags-only run (`headroom run --endpoint
// ... --model ...` without --gpus) names no GPUs, and the prediction's run
// file, which the built-in simulator sizes from nodes x gpus_per_node,
// failed validation ("recipe.nodes: must be at least 1, got 0"), so such a
// run could not be calibrated on or predicted. The fitted profile is the
// engine as measured; one node of one GPU stands in, and the price stays
// the run's (none: not priced).
func TestPredictConfigWithoutGPUs(t *testing.T) {
	r := realRun(t)
	r.Config.Recipe.Nodes, r.Config.Recipe.GPUsPerNode, r.Config.Recipe.USDPerGPUHour = 0, 0, 0
	cfg, err := PredictConfig(r, "fitted.yaml", "vllm", t.TempDir())
	if err != nil {
		t.Fatalf("a run that names no GPUs: %v", err)
	}
	if rc := cfg.Recipe; rc.Nodes != 1 || rc.GPUsPerNode != 1 || rc.USDPerGPUHour != 0 {
		t.Errorf("nodes %d x %d GPUs at $%g: want 1 x 1, not priced", rc.Nodes, rc.GPUsPerNode, rc.USDPerGPUHour)
	}
}

func TestFitRefusesManyCopies(t *testing.T) {
	r := realRun(t)
	r.Config.Recipe.Copies = 2
	if _, err := FitProfile([]Run{r}); err == nil || !strings.Contains(err.Error(), "2 engine copies") {
		t.Errorf("err = %v, want a refusal naming the copies", err)
	}
}

// TestComparisonText: steps one run lacks, and values it did not measure,
// read "-", never 0 or NaN.
func TestComparisonText(t *testing.T) {
	nan := math.NaN()
	m := []report.Step{
		{Sessions: 2, Verdict: "pass", TTFTP90: stats.Summary{Center: 1}, InteractivityP90: stats.Summary{Center: 20}},
		{Sessions: 4, Verdict: "fail", TTFTP90: stats.Summary{Center: 8}, InteractivityP90: stats.Summary{Center: nan}},
	}
	p := []report.Step{{Sessions: 2, Verdict: "pass", TTFTP90: stats.Summary{Center: 1.5}, InteractivityP90: stats.Summary{Center: 18}}}
	c := Comparison{Dir: "runs/x", Steps: compareSteps(m, p), StepSize: 2, CapacityError: -1}
	var b strings.Builder
	if err := c.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"+50%", "-10%", "-0.50 ladder steps"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "NaN") {
		t.Errorf("NaN in:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "4" {
			// measured TTFT 8, everything else not measured
			if want := []string{"4", "8.00", "-", "-", "-", "-", "-", "-", "-", "fail", "-"}; strings.Join(f, " ") != strings.Join(want, " ") {
				t.Errorf("the step the prediction did not run reads %q, want %q", f, want)
			}
		}
	}
}

// TestClockFollowsChunks: while a prompt longer than the budget is
// computed, every iteration is one chunk of it, however fast decodes alone
// would go; a decode beside it gets that many tokens.
func TestClockFollowsChunks(t *testing.T) {
	spans := []span{
		// decodes 1000 tokens from 0 to 20 s
		{arrive: 0, prefillStart: 0, first: 0.01, last: 20, prompt: 1000, output: 1001},
		// 81920 fresh tokens (10 chunks of 8192) computed from 5 to 15 s
		{arrive: 5, prefillStart: 5, first: 15, last: 15, prompt: 81920, output: 1},
	}
	clk := newIterClock(spans, []float64{0.01, 0, 1e-4, 0}, 8192)
	if n := clk.at(15) - clk.at(5); math.Abs(n-10) > 0.5 {
		t.Errorf("%.1f iterations while the long prompt was computed, want 10 (its chunks)", n)
	}
	if n := clk.at(4) - clk.at(2); math.Abs(n-200) > 1 {
		t.Errorf("%.1f iterations in 2 s of decoding alone at 10 ms, want 200", n)
	}
	w := workIn(spans, 5, 15, 8192, clk)
	if w.maxDecode > 20 {
		t.Errorf("the decode beside the long prompt got %.0f tokens in its 10 iterations: its tokens are spread by seconds, not iterations", w.maxDecode)
	}
	// tighten: the long prompt's start can be no earlier than its chunks
	// before its first token, so a wait before it is not prefill
	spans[1].prefillStart = 0
	if got := tighten(spans, clk, 8192)[1].prefillStart; math.Abs(got-5) > 0.1 {
		t.Errorf("tightened prefill start %.2f, want 5", got)
	}
}

// TestTroubledStretches: the windows where the engine preempted or held
// 90% of its KV cache are found scrape to scrape and skipped.
func TestTroubledStretches(t *testing.T) {
	sample := func(at float64, preempt, kv float64) signal.Sample {
		s := signal.NewSample(time.Duration(at * float64(time.Second)))
		s.Counter[signal.Preemptions] = preempt
		s.Gauge[signal.KVCacheUsage] = kv
		return s
	}
	tr := troubledOf([]signal.Sample{sample(0, 0, 0.5), sample(5, 0, 0.5), sample(10, 2, 0.5), sample(15, 2, 0.5), sample(20, 2, 0.95), sample(25, 2, 0.5)})
	if len(tr) != 3 || tr[0] != [2]float64{5, 10} || tr[1] != [2]float64{15, 20} || tr[2] != [2]float64{20, 25} {
		t.Fatalf("troubled %v, want [5 10] (preemptions) and [15 20] [20 25] (KV at 95%%)", tr)
	}
	for _, c := range []struct {
		t0, t1 float64
		want   bool
	}{{0, 4.9, false}, {4, 6, true}, {10.5, 14.5, false}, {14, 30, true}, {26, 30, false}} {
		if got := tr.touches(c.t0, c.t1); got != c.want {
			t.Errorf("touches(%g, %g) = %v, want %v", c.t0, c.t1, got, c.want)
		}
	}
}

// TestSimultaneousArrivalsServedByFirstToken: requests sent at the same
// instant are taken to have been served in the order of their first tokens.
func TestSimultaneousArrivalsServedByFirstToken(t *testing.T) {
	rec := func(lane int, first float64) load.Record {
		return load.Record{V: load.RecordVersion, Lane: lane, Send: 10, FirstToken: first, LastToken: first, ServedPromptTokens: 50000, OutputTokens: 1, Status: 200}
	}
	busy := load.Record{V: load.RecordVersion, Lane: 9, Send: 0, FirstToken: 1, LastToken: 100, ServedPromptTokens: 10, OutputTokens: 500, Status: 200}
	spans, _ := spansOf([]load.Record{busy, rec(1, 30), rec(2, 20)}, func(int) float64 { return 0 })
	if spans[1].lane != 2 || spans[1].prefillStart != 10 || spans[2].prefillStart != 20 {
		t.Errorf("spans %+v: want lane 2 (first token at 20) computed first, from 10, and lane 1 from 20", spans[1:])
	}
}
