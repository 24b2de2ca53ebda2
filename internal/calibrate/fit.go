package calibrate

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sim"
)

// Param is one field of the fitted profile: its value, its standard error
// when it was fitted, and where it came from.
type Param struct {
	Field  string  `json:"field"` // as the profile file spells it
	Value  float64 `json:"value"`
	SE     float64 `json:"se,omitempty"`
	Source string  `json:"source"`
	// Status is what pinned the value: Fitted, Given, Bound or Prior.
	Status string `json:"status"`
}

// Fit is a fitted profile and how it was reached.
type Fit struct {
	Profile     sim.Profile `json:"profile"`
	Personality string      `json:"personality"`
	Params      []Param     `json:"params"`
	// Equations is how many request windows the timing model was fitted
	// to: decode stretches and time-to-first-token stretches.
	DecodeWindows, PrefillWindows int
	// RMS is the fit's root mean square error over the decode windows, in seconds per iteration.
	RMS float64 `json:"rms_s"`
	// Notes say what was assumed or could not be fitted.
	Notes []string `json:"notes,omitempty"`
}

// Param returns the named field's entry.
func (f Fit) Param(field string) (Param, bool) {
	for _, p := range f.Params {
		if p.Field == field {
			return p, true
		}
	}
	return Param{}, false
}

// maxWindows bounds the windows of each kind taken from one run, so a long
// run fits in about a second; beyond it every n-th is taken.
const maxWindows = 4000

// minDecodeTokens is the fewest tokens after the first a request must
// sample for its decode to be a window.
const minDecodeTokens = 4

// FitProfile fits one engine profile to the runs, which must all have
// served one engine copy of the same model and engine. The timing model
// is the simulator's: an iteration costs decode_base_seconds, plus
// decode_seconds_per_kv_token per token of context its decodes read, plus
// the prompt tokens it computes over prefill_tokens_per_second, plus
// prefill_attention_seconds_per_kv_token per (token, earlier token) pair.
// Every request gives two equations of it: its decode (each of its tokens
// after the first is one iteration) and its wait for the first token; the
// work in each is rebuilt from the records of every request in flight.
// KV capacity is fitted from the KV-usage gauge against the tokens the
// requests in flight held; the block from the cached-token counts. Engine
// limits the recipe's args set (max_num_seqs, max_batched_tokens, ...) are
// read from them, not fitted.
func FitProfile(runs []Run) (Fit, error) {
	if len(runs) == 0 {
		return Fit{}, errors.New("calibrate: no run directories")
	}
	var f Fit
	first := runs[0].Config.Recipe
	p := sim.DefaultProfile()
	p.Name = "calibrated-" + first.Name
	p.Model = first.Model
	f.Personality = personalityOf(first.Engine)
	if f.Personality != strings.ToLower(first.Engine) {
		f.Notes = append(f.Notes, fmt.Sprintf("recipe.engine %q: fitted as vLLM's scheduler (mixed prefill and decode batches)", first.Engine))
	}
	for _, r := range runs {
		rc := r.Config.Recipe
		if rc.Copies > 1 {
			return f, fmt.Errorf("calibrate: %s served %d engine copies: calibrate from a run of one copy (the fitted profile is one engine, and any number of copies can be simulated from it)", r.Dir, rc.Copies)
		}
		if rc.Model != first.Model || personalityOf(rc.Engine) != f.Personality {
			return f, fmt.Errorf("calibrate: %s serves %s on %s but %s serves %s on %s: calibrate one model and engine at a time", r.Dir, rc.Model, rc.Engine, runs[0].Dir, first.Model, first.Engine)
		}
	}

	// Engine limits: the recipe's args, else the default profile's.
	limits := []struct {
		field string
		dst   *int
		flags []string
	}{
		{"max_num_seqs", &p.MaxNumSeqs, []string{"--max-num-seqs", "--max-running-requests"}},
		{"max_batched_tokens", &p.MaxBatchedTokens, []string{"--max-num-batched-tokens", "--chunked-prefill-size"}},
		{"block_size", &p.BlockSize, []string{"--block-size", "--page-size"}},
		{"max_model_len", &p.MaxModelLen, []string{"--max-model-len", "--context-length"}},
	}
	from := map[string]string{}
	for _, l := range limits {
		from[l.field] = "the default profile (not in the recipe's args)"
		if v, flag, ok := intArg(first.Args, l.flags...); ok {
			*l.dst, from[l.field] = v, "recipe args "+flag
		}
	}
	if !strings.HasPrefix(from["max_model_len"], "recipe") {
		switch s := runs[0].Summary; {
		case s.OverContext != nil && s.OverContext.ContextTokens > 0:
			p.MaxModelLen, from["max_model_len"] = s.OverContext.ContextTokens, "the served context ("+s.OverContext.Source+")"
		case first.MaxModelLen > 0:
			p.MaxModelLen, from["max_model_len"] = first.MaxModelLen, "recipe.max_model_len"
		}
	}
	if !strings.HasPrefix(from["block_size"], "recipe") {
		if b, n := blockOf(runs); b > 0 {
			p.BlockSize, from["block_size"] = b, fmt.Sprintf("fitted: the greatest common divisor of %d cached-token counts", n)
		}
	}

	// The timing model.
	var skipped int
	var troubled float64
	spans := make([][]span, len(runs))
	skip := make([]stretches, len(runs))
	occ := make([]*occupancy, len(runs))
	var queue gapModel
	for i, r := range runs {
		g := fitGap(r)
		if i == 0 || g.queueKnown && !queue.queueKnown {
			queue = g
		}
		sp, sk := spansOf(r.Records, g.at)
		skipped += sk
		spans[i] = sp
		occ[i] = newOccupancy(sp, p.MaxNumSeqs)
		skip[i] = troubledOf(r.Samples)
		for _, s := range skip[i] {
			troubled += s[1] - s[0]
		}
		if g.note != "" {
			f.Notes = append(f.Notes, r.Dir+": "+g.note)
		}
	}
	if troubled > 0 {
		f.Notes = append(f.Notes, fmt.Sprintf("the engine preempted requests or held %.0f%% of its KV cache or more in %.0f s of the runs: the timing fit leaves out the windows that touch them", 100*kvFull, troubled))
	}
	if skipped > 0 {
		f.Notes = append(f.Notes, fmt.Sprintf("%d requests that failed or gave no tokens are left out of the fit (their engine time is not modelled)", skipped))
	}
	timingParams, err := fitBoth(&f, &p, spans, skip, occ)
	if err != nil {
		return f, err
	}
	if p.PrefillTokensPerSecond == besideRate && !strings.HasPrefix(from["max_batched_tokens"], "recipe") {
		// an engine that times each prompt beside the batch does not chunk
		// it: left at the default budget, the simulator would spend an
		// iteration (slowed by the load) on each 8192 tokens of a
		// 100K-token prompt, 47-75% on the P90 TTFT of a recorded
		// llm-d-inference-sim run
		p.MaxBatchedTokens = max(p.MaxBatchedTokens, p.MaxModelLen)
		from["max_batched_tokens"] = "fitted beside the batch: the runs' engine times each prompt on its own, so a prompt takes one iteration, not chunks of the default budget"
	}
	p.TTFTFromAdmission = queue.fromAdmission
	queueParam := Param{Field: "ttft_from_admission", Status: Prior, Source: queue.queueNote}
	if queue.fromAdmission {
		queueParam.Value = 1
	}
	if queue.queueKnown {
		queueParam.Status = Fitted
	}
	var answers, caching Param
	p.AnswerFractions, answers = fitAnswers(runs)
	p.NoPrefixCaching, caching = fitPrefixCaching(runs)

	// KV capacity from the usage gauge: the median over scrapes of the
	// tokens held over the share of blocks in use, leaving out scrapes
	// where the engine was preempting or short of KV (a preempted request
	// holds what no record shows).
	var ratios []float64
	for i, r := range runs {
		for _, s := range r.Samples {
			u, ok := s.Gauge[signal.KVCacheUsage]
			at := s.At.Seconds()
			if !ok || math.IsNaN(u) || u < 0.02 || u > 0.95 || skip[i].touches(at-1e-9, at+1e-9) {
				continue
			}
			if tok := resident(spans[i], at, p.BlockSize); tok > 0 {
				ratios = append(ratios, tok/u)
			}
		}
	}
	kvFrom := "the default profile (no scrape read the KV-usage gauge between 2% and 95% while the engine ran clear)"
	kvStatus := Prior
	var kvSE float64
	if len(ratios) >= 3 {
		sort.Float64s(ratios)
		mid := ratios[len(ratios)/2]
		p.KVCapacityTokens = int(math.Round(mid))
		kvFrom, kvStatus = fmt.Sprintf("fitted: the median over %d scrapes of the tokens the requests in flight held over the KV-usage gauge", len(ratios)), Fitted
		dev := make([]float64, len(ratios))
		for k, v := range ratios {
			dev[k] = v - mid
		}
		kvSE = 1.25 * robustSigma(dev) / math.Sqrt(float64(len(ratios))) // a median's standard error
	} else if kv, why, ok := kvBound(runs, spans, p.BlockSize, p.KVCapacityTokens); ok {
		p.KVCapacityTokens, kvFrom, kvStatus = kv, why, Bound
	} else {
		f.Notes = append(f.Notes, "the KV cache capacity is the default profile's: no scrape read the KV-usage gauge while the engine ran clear")
	}
	f.Notes = append(f.Notes, "not fitted: the host cache tier (host_cache_tokens), kv_bytes_per_token and prefill/decode links keep the default profile's values")

	f.Profile = p
	f.Params = append(timingParams,
		Param{Field: "kv_capacity_tokens", Value: float64(p.KVCapacityTokens), SE: kvSE, Source: kvFrom, Status: kvStatus},
		Param{Field: "block_size", Value: float64(p.BlockSize), Source: from["block_size"], Status: statusOf(from["block_size"])},
		Param{Field: "max_num_seqs", Value: float64(p.MaxNumSeqs), Source: from["max_num_seqs"], Status: statusOf(from["max_num_seqs"])},
		Param{Field: "max_batched_tokens", Value: float64(p.MaxBatchedTokens), Source: from["max_batched_tokens"], Status: statusOf(from["max_batched_tokens"])},
		Param{Field: "max_model_len", Value: float64(p.MaxModelLen), Source: from["max_model_len"], Status: statusOf(from["max_model_len"])},
		answers, caching, queueParam,
	)
	if err := p.Validate(); err != nil {
		return f, fmt.Errorf("calibrate: the fitted profile is not valid: %w", err)
	}
	return f, nil
}

// personalityOf is the simulator personality that schedules like engine.
func personalityOf(engine string) string {
	if strings.EqualFold(engine, "sglang") {
		return "sglang"
	}
	return "vllm"
}

// intArg finds the first of flags in args, as "--flag N" or "--flag=N".
func intArg(args []string, flags ...string) (int, string, bool) {
	for i, a := range args {
		for _, fl := range flags {
			v := ""
			switch {
			case a == fl && i+1 < len(args):
				v = args[i+1]
			case strings.HasPrefix(a, fl+"="):
				v = strings.TrimPrefix(a, fl+"=")
			default:
				continue
			}
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n, fl, true
			}
		}
	}
	return 0, "", false
}

// blockOf is the KV block the cached-token counts are multiples of (a
// prefix cache hits whole blocks), with how many counts it rests on; 0
// when fewer than 20 requests were served from cache or the divisor is not
// a power of two of at least 8 (SGLang's radix cache counts single tokens).
func blockOf(runs []Run) (int, int) {
	g, n := 0, 0
	for _, r := range runs {
		for _, rec := range r.Records {
			if rec.CachedTokens > 0 && !rec.Failed() {
				g = gcd(g, rec.CachedTokens)
				n++
			}
		}
	}
	if n < 20 || g < 8 || g&(g-1) != 0 {
		return 0, n
	}
	return g, n
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// decodeEquations are the decode windows: from a request's first token to
// its last, each of its later tokens is one iteration (SGLang adds the
// prefill batches that paused it). One row per request, scaled to seconds
// per iteration.
func decodeEquations(spans []span, skip stretches, budget int, personality string, clk *iterClock) (x [][]float64, y []float64, n int) {
	var idx []int
	for i, s := range spans {
		if s.decodeTokens() >= minDecodeTokens && s.last > s.first && !skip.touches(s.first, s.last) {
			idx = append(idx, i)
		}
	}
	for _, i := range stride(idx, maxWindows) {
		s := spans[i]
		w := workIn(spans, s.first, s.last, budget, clk)
		iters := float64(s.decodeTokens())
		if personality == "sglang" {
			iters += w.prefillIters
		}
		x = append(x, []float64{1, w.decodeContext / iters, w.prefill / iters, w.pairs / iters})
		y = append(y, (s.last-s.first)/iters)
		n++
	}
	return x, y, n
}

// prefillEquations are the waits for the first token: from a request's
// arrival to its first token the engine ran iterations of everyone's work.
// Their number is taken from the request decoding most in that time (one
// token an iteration) or from the prompt tokens computed (a budget an
// iteration), whichever is more (SGLang: the two added).
func prefillEquations(spans []span, skip stretches, budget int, personality string, clk *iterClock) (x [][]float64, y []float64, n int) {
	var idx []int
	for i, s := range spans {
		if s.uncached() > 0 && s.first > s.arrive && !skip.touches(s.arrive, s.first) {
			idx = append(idx, i)
		}
	}
	for _, i := range stride(idx, maxWindows) {
		s := spans[i]
		w := workIn(spans, s.arrive, s.first, budget, clk)
		iters := max(w.maxDecode, w.prefill/float64(budget), 1)
		if personality == "sglang" {
			iters = max(w.maxDecode+w.prefillIters, 1)
		}
		x = append(x, []float64{1, w.decodeContext / iters, w.prefill / iters, w.pairs / iters})
		y = append(y, (s.first-s.arrive)/iters)
		n++
	}
	return x, y, n
}

// stride keeps at most n of idx, evenly spaced.
func stride(idx []int, n int) []int {
	if len(idx) <= n {
		return idx
	}
	out := make([]int, 0, n)
	for k := range n {
		out = append(out, idx[k*len(idx)/n])
	}
	return out
}

// residuals are y - X b.
func residuals(x [][]float64, y []float64, b []float64) []float64 {
	out := make([]float64, len(y))
	for i, row := range x {
		p := 0.0
		for j, v := range row {
			p += v * b[j]
		}
		out[i] = y[i] - p
	}
	return out
}

// robustSigma is 1.4826 times the median absolute residual: the standard
// deviation of the residuals' normal core, unmoved by outliers.
func robustSigma(res []float64) float64 {
	if len(res) == 0 {
		return 0
	}
	a := make([]float64, len(res))
	for i, r := range res {
		a[i] = math.Abs(r)
	}
	sort.Float64s(a)
	return 1.4826 * a[len(a)/2]
}

// timingPasses is how many times the fit is repeated with the iteration
// clock of the one before.
const timingPasses = 3

// fitTiming fits the iteration cost model to the decode and prefill
// windows of every run's spans, and returns the fit with how many windows
// of each kind it rests on. The first pass spreads each request's work
// evenly in seconds; each later one evenly in the iterations the previous
// fit says the engine ran (see iterClock).
func fitTiming(spans [][]span, skip []stretches, budget int, personality string) (sol lsq, decode, prefill int, err error) {
	var clocks []*iterClock
	for pass := range timingPasses {
		var dx, px [][]float64
		var dy, py []float64
		decode, prefill = 0, 0
		for i, sp := range spans {
			var clk *iterClock
			if clocks != nil {
				clk = clocks[i]
				sp = tighten(sp, clk, budget)
			}
			x, y, n := decodeEquations(sp, skip[i], budget, personality, clk)
			dx, dy, decode = append(dx, x...), append(dy, y...), decode+n
			x, y, n = prefillEquations(sp, skip[i], budget, personality, clk)
			px, py, prefill = append(px, x...), append(py, y...), prefill+n
		}
		if decode < 10 || prefill < 5 {
			return sol, decode, prefill, fmt.Errorf("calibrate: %d decode and %d prefill windows are too few to fit the engine's timing: calibrate from a run with more requests (longer or more steps)", decode, prefill)
		}
		next, err := fitWindows(dx, dy, px, py)
		if err != nil {
			if pass > 0 {
				return sol, decode, prefill, nil
			}
			return sol, decode, prefill, fmt.Errorf("calibrate: the timing fit failed: %v", err)
		}
		sol = next
		nextClocks := make([]*iterClock, len(spans))
		for i, sp := range spans {
			if clocks != nil {
				sp = tighten(sp, clocks[i], budget)
			}
			nextClocks[i] = newIterClock(sp, sol.coef, budget)
		}
		clocks = nextClocks
	}
	return sol, decode, prefill, nil
}

// fitWindows fits the iteration cost model in two steps. Decode windows
// count their iterations exactly and are fitted first; then every window
// is weighted by the inverse of its kind's robust residual spread under
// that first fit (a wait for the first token carries the client's timing
// error and reconstructed queueing, so it counts far less), and both kinds
// are fitted together. Both fits are trimmed (see fitTrimmed): a client
// stamp the host delayed is an outlier, not a slower engine.
func fitWindows(dx [][]float64, dy []float64, px [][]float64, py []float64) (lsq, error) {
	first, err := fitTrimmed(dx, dy, trimDecode)
	if err != nil {
		return fitTrimmed(append(append([][]float64{}, dx...), px...), append(append([]float64{}, dy...), py...), trimBoth)
	}
	var x [][]float64
	var y []float64
	add := func(xs [][]float64, ys []float64) {
		res := residuals(xs, ys, first.coef)
		s := robustSigma(res)
		if !(s > 0) {
			s = first.rms
		}
		if !(s > 0) {
			s = 1
		}
		for i := range xs {
			row := make([]float64, len(xs[i]))
			for j := range row {
				row[j] = xs[i][j] / s
			}
			x, y = append(x, row), append(y, ys[i]/s)
		}
	}
	add(dx, dy)
	add(px, py)
	sol, err := fitTrimmed(x, y, trimBoth)
	if err != nil {
		return first, nil
	}
	// the residual in seconds per iteration, over the decode windows kept
	res := residuals(dx, dy, sol.coef)
	cut := trimDecode * robustSigma(res)
	ss, n := 0.0, 0
	for _, r := range res {
		if math.Abs(r) <= cut {
			ss += r * r
			n++
		}
	}
	if n > 0 {
		sol.rms = math.Sqrt(ss / float64(n))
	}
	return sol, nil
}

// How many robust spreads off a window may be and still count: in the
// decode-only fit, and in the fit of both kinds (whose waits for a first
// token spread wider, and whose long prompts say most about prefill).
const (
	trimDecode = 3
	trimBoth   = 5
)

// fitTrimmed fits, drops the rows more than at robust spreads off, and
// fits again, until the rows kept stop changing (at most 8 times).
func fitTrimmed(x [][]float64, y []float64, at float64) (lsq, error) {
	keep := make([]bool, len(y))
	for i := range keep {
		keep[i] = true
	}
	var sol lsq
	for range 8 {
		var kx [][]float64
		var ky []float64
		for i := range y {
			if keep[i] {
				kx, ky = append(kx, x[i]), append(ky, y[i])
			}
		}
		next, err := fitNonNegative(kx, ky)
		if err != nil {
			if sol.coef != nil {
				return sol, nil
			}
			return next, err
		}
		sol = next
		res := residuals(x, y, sol.coef)
		var kept []float64
		for i, r := range res {
			if keep[i] {
				kept = append(kept, r)
			}
		}
		cut := at * robustSigma(kept)
		changed := false
		for i, r := range res {
			if k := math.Abs(r) <= cut; k != keep[i] {
				keep[i], changed = k, true
			}
		}
		if !changed || cut == 0 {
			break
		}
	}
	return sol, nil
}
