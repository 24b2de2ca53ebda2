package calibrate

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/headroom-bench/headroom/internal/load"
)

// TestOccupancyAdmitsFirstComeFirstServed: on a two-slot engine the third
// of three requests sent together takes the slot the first one frees, and
// the load factor's variable part is 1 while two run.
func TestOccupancyAdmitsFirstComeFirstServed(t *testing.T) {
	spans := []span{
		{arrive: 0, first: 1, last: 2},
		{arrive: 0, first: 1, last: 3},
		{arrive: 0, first: 3, last: 4},
	}
	o := newOccupancy(spans, 2)
	if o.admit[0] != 0 || o.admit[1] != 0 || o.admit[2] != 2 {
		t.Errorf("admissions %v, want [0 0 2]", o.admit)
	}
	if m := o.mean(0, 2); math.Abs(m-1) > 1e-9 {
		t.Errorf("mean excess over [0, 2] %.3f, want 1 (two running of two)", m)
	}
	if m := o.mean(3, 4); m != 0 {
		t.Errorf("mean excess over [3, 4] %.3f, want 0 (one running)", m)
	}
}

type llmdReq struct {
	arrive, due, first float64
	prompt, left, out  int
	running            bool
}

// llmdLike generates the records of an engine that times each request on
// its own as llm-d-inference-sim does: m slots first come first served, a
// wait of lf x (fixed + perToken x prompt) for the first token and lf x
// itl for each later one, lf = 1 + slow x (running - 1) / (m - 1) read
// when each wait starts.
func llmdLike(m int, fixed, perToken, itl, slow float64, n int, seed uint64) []span {
	rng := rand.New(rand.NewPCG(seed, 1))
	var reqs []*llmdReq
	at := 0.0
	for range n {
		// bursts of load that come and go, so the running count varies
		at += rng.ExpFloat64() * (0.3 + 2*math.Abs(math.Sin(at/40)))
		out := 20 + rng.IntN(200)
		reqs = append(reqs, &llmdReq{arrive: at, prompt: 1000 + rng.IntN(60000), out: out, left: out})
	}
	lf := func(running int) float64 { return 1 + slow*float64(running-1)/float64(m-1) }
	var spans []span
	next, running, now := 0, 0, 0.0
	var active []*llmdReq
	for len(spans) < n {
		// the next event: an arrival or the earliest due token
		var soon *llmdReq
		for _, r := range active {
			if r.running && (soon == nil || r.due < soon.due) {
				soon = r
			}
		}
		if next < len(reqs) && (soon == nil || reqs[next].arrive <= soon.due) {
			now = reqs[next].arrive
			active = append(active, reqs[next])
			next++
		} else {
			now = soon.due
			if soon.first == 0 {
				soon.first = now
			}
			soon.left--
			if soon.left == 0 {
				soon.running = false
				running--
				spans = append(spans, span{arrive: soon.arrive, prefillStart: soon.arrive, first: soon.first, last: now, prompt: soon.prompt, output: soon.out})
				active = slices.DeleteFunc(active, func(r *llmdReq) bool { return r == soon })
			} else {
				soon.due = now + lf(running)*itl
			}
		}
		for _, r := range active { // admit first come first served
			if !r.running && r.first == 0 && running < m {
				running++
				r.running = true
				r.due = now + lf(running)*(fixed+perToken*float64(r.prompt))
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].arrive < spans[j].arrive })
	return spans
}

// TestFitBesideRecoversAPerRequestEngine: the records of an engine that
// times each request on its own (1.6 s + 40 us a prompt token to the first
// token, 10 ms a token after it, three times slower full) are fitted
// beside the batch to within 10%, the slow-down from the varying load.
func TestFitBesideRecoversAPerRequestEngine(t *testing.T) {
	spans := llmdLike(8, 1.6, 40e-6, 0.010, 2, 600, 1)
	skip := []stretches{nil}
	occ := []*occupancy{newOccupancy(spans, 8)}
	f, err := fitBeside([][]span{spans}, skip, occ, 8192)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]float64{
		"request_seconds":                  {f.wait.coef[0], 1.6},
		"request_seconds_per_prompt_token": {f.wait.coef[1], 40e-6},
		"decode_base_seconds":              {f.decode.coef[0], 0.010},
		"load_slowdown":                    {f.slowdown, 2},
	}
	for k, v := range got {
		t.Logf("%s: fitted %.4g, true %.4g", k, v[0], v[1])
		if math.Abs(v[0]-v[1]) > 0.1*v[1] {
			t.Errorf("%s: fitted %.4g, true %.4g: off by more than 10%%", k, v[0], v[1])
		}
	}
	if !f.slowdownFitted || f.waitRel > 0.1 {
		t.Errorf("slow-down fitted %v (spread %.2f), wait error %.2f", f.slowdownFitted, f.excessSpread, f.waitRel)
	}
}

// TestAnswersAndCaching: answers shorter than max_tokens give a
// distribution; answers that all run to max_tokens leave it off. Repeated
// prompt starts never served from cache say the engine has no prefix
// cache.
func TestAnswersAndCaching(t *testing.T) {
	var short, full []load.Record
	for i := range 100 {
		short = append(short, load.Record{MaxTokens: 500, OutputTokens: 5 * (i + 1) % 500, IdealCachedTokens: 1000, Status: 200})
		full = append(full, load.Record{MaxTokens: 500, OutputTokens: 500, IdealCachedTokens: 1000, CachedTokens: 992, Status: 200})
	}
	short[99].OutputTokens = 500
	q, p := fitAnswers([]Run{{Records: short}})
	if p.Status != Fitted || q[0] > 0.02 || q[20] != 1 || math.Abs(q[10]-0.5) > 0.02 {
		t.Errorf("answers 5..500 of 500: %s %q, quantiles %v", p.Status, p.Source, q)
	}
	if q, p := fitAnswers([]Run{{Records: full}}); p.Status != Prior || q[20] != 0 {
		t.Errorf("answers all to max_tokens: %s %q, quantiles %v", p.Status, p.Source, q)
	}
	if off, p := fitPrefixCaching([]Run{{Records: short}}); !off || p.Status != Fitted {
		t.Errorf("no cached tokens on 100 repeats: off %v, %s", off, p.Source)
	}
	if off, p := fitPrefixCaching([]Run{{Records: full}}); off || p.Status != Fitted {
		t.Errorf("cached tokens on every repeat: off %v, %s", off, p.Source)
	}
	if _, p := fitPrefixCaching(nil); p.Status != Prior {
		t.Errorf("no records: %s %s", p.Status, p.Source)
	}
}

// TestDecideQueue: the client's TTFT less the engine's holds the queue
// time when the engine's TTFT leaves it out, and not when it counts it; a
// run that hardly queued cannot tell.
func TestDecideQueue(t *testing.T) {
	rows := func(withQueue bool, queue float64) []queueRow {
		var out []queueRow
		for i := range 40 {
			q := queue * float64(i%5)
			d := 0.02*4 + 1e-6*4*float64(1000*i)
			if withQueue {
				d += q
			}
			out = append(out, queueRow{n: 4, prompt: 4 * float64(1000*i), diff: d, queue: q})
		}
		return out
	}
	if from, ok, note := decideQueue(rows(true, 2)); !from || !ok {
		t.Errorf("queue in the difference: from admission %v, known %v: %s", from, ok, note)
	}
	if from, ok, note := decideQueue(rows(false, 2)); from || !ok {
		t.Errorf("queue not in the difference: from admission %v, known %v: %s", from, ok, note)
	}
	if _, ok, note := decideQueue(rows(true, 0.001)); ok {
		t.Errorf("80 ms of queue in all was taken to tell: %s", note)
	}
}

// TestShifted: the fitted timing fields move by their standard errors
// towards a slower engine (a lower prefill rate, higher costs), the others
// stay.
func TestShifted(t *testing.T) {
	f := Fit{Params: []Param{
		{Field: "prefill_tokens_per_second", Value: 20000, SE: 1000, Status: Fitted},
		{Field: "decode_base_seconds", Value: 0.01, SE: 0.001, Status: Fitted},
		{Field: "request_seconds", Value: 2, SE: 0.1, Status: Fitted},
		{Field: "decode_seconds_per_kv_token", Value: 1e-8, SE: 1e-9, Status: Prior},
	}}
	f.Profile.PrefillTokensPerSecond, f.Profile.DecodeBaseSeconds, f.Profile.RequestSeconds, f.Profile.DecodeSecondsPerKVToken = 20000, 0.01, 2, 1e-8
	p := f.Shifted(2)
	if p.PrefillTokensPerSecond != 18000 || math.Abs(p.DecodeBaseSeconds-0.012) > 1e-12 || math.Abs(p.RequestSeconds-2.2) > 1e-12 || p.DecodeSecondsPerKVToken != 1e-8 {
		t.Errorf("shifted 2 SE slower: %+v", p)
	}
	if q := f.Shifted(-2); q.PrefillTokensPerSecond != 22000 || math.Abs(q.RequestSeconds-1.8) > 1e-12 {
		t.Errorf("shifted 2 SE faster: %+v", q)
	}
}

// TestFitBesideRecoversAHighSlowdown: llm-d-inference-sim run with
// --time-factor-under-load 30 over 32 slots (a slow-down of 29: 0.2 s to
// the first token and 5 ms a token idle, thirty times that full). The grid
// of slow-downs stopped at 8, and the fit took 8 with a fixed wait of
// 0.62 s for a recorded run of that server; it must find the slow-down
// within 15% and the fixed wait within 15%.
func TestFitBesideRecoversAHighSlowdown(t *testing.T) {
	spans := llmdLike(32, 0.2, 0, 0.005, 29, 800, 3)
	f, err := fitBeside([][]span{spans}, []stretches{nil}, []*occupancy{newOccupancy(spans, 32)}, 8192)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("slow-down %.3g, fixed wait %.4g s, decode %.4g s (spread %.2f)", f.slowdown, f.wait.coef[0], f.decode.coef[0], f.excessSpread)
	if !f.slowdownFitted || math.Abs(f.slowdown-29) > 0.15*29 {
		t.Errorf("slow-down %.3g (fitted %v), want 29 within 15%%", f.slowdown, f.slowdownFitted)
	}
	if math.Abs(f.wait.coef[0]-0.2) > 0.15*0.2 {
		t.Errorf("fixed wait %.4g s, want 0.2 s within 15%%", f.wait.coef[0])
	}
}
