package calibrate

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/headroom-bench/headroom/internal/sim"
)

// besideFit is the timing model of an engine that times each request on
// its own rather than in a shared batch (llm-d-inference-sim does): a
// request, once it holds one of max_num_seqs slots, waits a fixed time
// plus a time per uncached prompt token for its first token, and each
// later token takes an iteration of the decode cost; all of it stretched
// by the load factor 1 + slowdown x (running - 1) / (max_num_seqs - 1).
// Prompt tokens cost the batch nothing.
type besideFit struct {
	slowdown           float64
	slowdownFitted     bool
	decode, wait       lsq // [base, per context token], [fixed, per prompt token]
	decodeRel, waitRel float64
	decodeN, waitN     int
	excessSpread       float64
}

// slowdownGrid is the load slow-downs tried: the fit is linear in the
// other coefficients once the slow-down is fixed.
//
// It reaches 63, a load factor of 64 at max_num_seqs: llm-d-inference-sim's
// --time-factor-under-load F is a slow-down of F - 1. A grid that stopped at
// 8 fitted a recorded run of that server at F = 30 over 32 slots (true: 29
// and a fixed wait of 0.2 s) with 8 and 0.62 s; with the grid to 63 it
// finds 20 and 0.28 s, and its errors fall from 0.05 + 0.09 to 0.03 + 0.03
// (TestFitBesideRecoversAHighSlowdown: 28 and 0.202 s on records made to
// that model).
var slowdownGrid = []float64{0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 8,
	10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 63}

// minExcessSpread is how much the running requests must vary between
// decode windows (in the load factor's variable part, 0 to 1) for the
// slow-down to be told apart from the decode cost.
const minExcessSpread = 0.05

type besideRow struct {
	y, ctx, excess float64 // decode: seconds per iteration; wait: seconds
	unc            float64 // wait: uncached prompt tokens
}

// fitBeside fits the model to the decode windows and to the waits from
// taking a slot to the first token (slots rebuilt first come first served
// from max_num_seqs).
func fitBeside(spans [][]span, skip []stretches, occ []*occupancy, budget int) (besideFit, error) {
	var dec, wait []besideRow
	for i, sp := range spans {
		var di, wi []int
		for j, s := range sp {
			if s.decodeTokens() >= minDecodeTokens && s.last > s.first && !skip[i].touches(s.first, s.last) {
				di = append(di, j)
			}
			if a := occ[i].admit[j]; s.first > a && !skip[i].touches(a, s.first) {
				wi = append(wi, j)
			}
		}
		for _, j := range stride(di, maxWindows) {
			s := sp[j]
			k := float64(s.decodeTokens())
			w := workIn(sp, s.first, s.last, budget, nil)
			dec = append(dec, besideRow{y: (s.last - s.first) / k, ctx: w.decodeContext / k, excess: occ[i].mean(s.first, s.last)})
		}
		for _, j := range stride(wi, maxWindows) {
			s, a := sp[j], occ[i].admit[j]
			wait = append(wait, besideRow{y: s.first - a, unc: float64(s.uncached()), excess: occ[i].at(a)})
		}
	}
	f := besideFit{decodeN: len(dec), waitN: len(wait)}
	if len(dec) < 10 || len(wait) < 5 {
		return f, errors.New("too few windows")
	}
	ex := make([]float64, len(dec))
	for i, r := range dec {
		ex[i] = r.excess
	}
	f.excessSpread = stddev(ex)
	grid := []float64{0}
	if f.excessSpread >= minExcessSpread {
		grid, f.slowdownFitted = slowdownGrid, true
	}
	wMed := medianY(wait)
	best := math.Inf(1)
	for _, s := range grid {
		var x [][]float64
		var y []float64
		for _, r := range dec {
			lf := 1 + s*r.excess
			x, y = append(x, []float64{lf, lf * r.ctx}), append(y, r.y)
		}
		d, err := fitTrimmed(x, y, trimDecode)
		if err != nil {
			continue
		}
		x, y = x[:0], y[:0]
		for _, r := range wait {
			lf := 1 + s*r.excess
			// the first token comes an iteration after the wait
			x, y = append(x, []float64{lf, lf * r.unc}), append(y, r.y-lf*d.coef[0])
		}
		w, err := fitTrimmed(x, y, trimBoth)
		if err != nil {
			continue
		}
		waitRel := robustSigma(residuals(x, y, w.coef)) / wMed
		var dres, dys []float64
		for _, r := range dec {
			lf := 1 + s*r.excess
			dres, dys = append(dres, math.Abs(r.y-lf*(d.coef[0]+d.coef[1]*r.ctx))), append(dys, r.y)
		}
		decodeRel := mean(dres) / mean(dys)
		if score := decodeRel + waitRel; score < best {
			best = score
			f.slowdown, f.decode, f.wait = s, d, w
			f.decodeRel, f.waitRel = decodeRel, waitRel
		}
	}
	if f.decode.coef == nil {
		return f, errors.New("no non-negative solution")
	}
	return f, nil
}

// batchedRel is how far the batched model's own account of the runs is
// off: each decode window's seconds per iteration from the work in it
// (mean absolute error over the mean), and each wait for the first token
// (from taking a slot: the wait behind earlier prompts, first come first
// served, then its own chunks at the fitted cost; the robust spread over
// the median), over the same windows as fitBeside's.
func batchedRel(spans [][]span, skip []stretches, occ []*occupancy, coef []float64, budget int, personality string) (decode, wait float64) {
	var res, ys, dres, dys []float64
	for i, sp := range spans {
		for j, s := range sp {
			if k := float64(s.decodeTokens()); k >= minDecodeTokens && s.last > s.first && !skip[i].touches(s.first, s.last) {
				w := workIn(sp, s.first, s.last, budget, nil)
				iters := k
				if personality == "sglang" {
					iters += w.prefillIters
				}
				pred := coef[0] + (coef[1]*w.decodeContext+coef[2]*w.prefill+coef[3]*w.pairs)/iters
				y := (s.last - s.first) / k
				dres, dys = append(dres, math.Abs(y-pred)), append(dys, y)
			}
			a := occ[i].admit[j]
			if !(s.first > a) || skip[i].touches(a, s.first) {
				continue
			}
			u := float64(s.uncached())
			iters := max(1, math.Ceil(u/float64(budget)))
			w := workIn(sp, s.prefillStart, s.first, budget, nil)
			perIter := coef[0] + coef[1]*w.decodeContext/max(1, w.maxDecode)
			pred := max(0, s.prefillStart-a) + u*coef[2] + coef[3]*u*(float64(s.cached)+u/2) + iters*perIter
			res, ys = append(res, s.first-a-pred), append(ys, s.first-a)
		}
	}
	if len(ys) == 0 || len(dys) == 0 {
		return math.Inf(1), math.Inf(1)
	}
	return mean(dres) / mean(dys), robustSigma(res) / median(ys)
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func medianY(rows []besideRow) float64 {
	ys := make([]float64, len(rows))
	for i, r := range rows {
		ys[i] = r.y
	}
	return median(ys)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if m <= 0 {
		return 1
	}
	return m
}

func stddev(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := 0.0
	for _, x := range v {
		m += x
	}
	m /= float64(len(v))
	ss := 0.0
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(v)-1))
}

// besideRate is the prefill rate a profile fitted beside the batch gets:
// prompt tokens then cost the batch next to nothing.
const besideRate = 1e9

// fitBoth fits the timing model both ways, prefill in the batch (the
// simulator's engine, vLLM's and SGLang's) and each request timed beside
// it (see besideFit), and keeps prefill in the batch unless timing each
// request beside it accounts for the waits for the first token much
// better (an error under 0.6 of the batch's) and for the decode windows
// as well (within 0.03); it writes the fields into p and returns their
// Params.
func fitBoth(f *Fit, p *sim.Profile, spans [][]span, skip []stretches, occ []*occupancy) ([]Param, error) {
	sol, dn, pn, errB := fitTiming(spans, skip, p.MaxBatchedTokens, f.Personality)
	f.DecodeWindows, f.PrefillWindows = dn, pn
	if errB == nil && sol.coef[2] <= 0 {
		errB = errors.New("calibrate: the fit found no cost for prompt tokens: the runs' prompts were all cached or too short to time prefill; calibrate from a run that sends long fresh prompts (its priming requests do)")
	}
	if errB == nil && sol.coef[0] == 0 && sol.coef[1] == 0 {
		errB = errors.New("calibrate: the fit found no cost for decoding: the runs' answers were too short to time")
	}
	bes, errS := fitBeside(spans, skip, occ, p.MaxBatchedTokens)
	if errS == nil && bes.decode.coef[0] == 0 && bes.decode.coef[1] == 0 {
		errS = errors.New("no decode cost")
	}
	var bDec, bWait float64
	if errB == nil {
		bDec, bWait = batchedRel(spans, skip, occ, sol.coef, p.MaxBatchedTokens, f.Personality)
	}
	if errB != nil && errS != nil {
		return nil, errB
	}
	compare := fmt.Sprintf("relative error of decode windows + waits for the first token: prefill in the batch %s, each request timed beside it %s",
		relText(bDec, bWait, errB), relText(bes.decodeRel, bes.waitRel, errS))
	if errS == nil && (errB != nil || bes.waitRel < 0.6*bWait && bes.decodeRel <= bDec+0.03) {
		f.RMS = bes.decode.rms
		f.DecodeWindows, f.PrefillWindows = bes.decodeN, bes.waitN
		p.PrefillTokensPerSecond, p.PrefillAttentionSecondsPerKVToken = besideRate, 0
		p.DecodeBaseSeconds, p.DecodeSecondsPerKVToken = bes.decode.coef[0], bes.decode.coef[1]
		p.RequestSeconds, p.RequestSecondsPerPromptToken = bes.wait.coef[0], bes.wait.coef[1]
		p.LoadSlowdown = bes.slowdown
		timing := fmt.Sprintf("fitted beside the batch to %d decode windows and %d waits from a slot to the first token (%s)", bes.decodeN, bes.waitN, compare)
		slow := Param{Field: "load_slowdown", Value: bes.slowdown, Status: Fitted,
			Source: fmt.Sprintf("fitted: the best of %d slow-downs for the running requests the windows saw (spread %.2f of max_num_seqs)", len(slowdownGrid), bes.excessSpread)}
		if !bes.slowdownFitted {
			slow.Status = Prior
			slow.Source = fmt.Sprintf("prior (off): the running requests barely varied between windows (spread %.2f of max_num_seqs, under %.2f), so a slow-down cannot be told from the decode cost", bes.excessSpread, minExcessSpread)
		}
		return []Param{
			{Field: "prefill_tokens_per_second", Value: besideRate, Status: Fitted, Source: "fitted: prompt tokens cost the batch nothing (" + compare + ")"},
			{Field: "prefill_attention_seconds_per_kv_token", Value: 0, Status: Fitted, Source: "fitted: prompt tokens cost the batch nothing"},
			{Field: "decode_base_seconds", Value: p.DecodeBaseSeconds, SE: bes.decode.se[0], Source: timing, Status: Fitted},
			{Field: "decode_seconds_per_kv_token", Value: p.DecodeSecondsPerKVToken, SE: bes.decode.se[1], Source: timing, Status: Fitted},
			{Field: "request_seconds", Value: p.RequestSeconds, SE: bes.wait.se[0], Source: timing, Status: Fitted},
			{Field: "request_seconds_per_prompt_token", Value: p.RequestSecondsPerPromptToken, SE: bes.wait.se[1], Source: timing, Status: Fitted},
			slow,
		}, nil
	}
	f.RMS = sol.rms
	timing := fmt.Sprintf("fitted to %d decode and %d prefill windows", f.DecodeWindows, f.PrefillWindows)
	p.DecodeBaseSeconds, p.DecodeSecondsPerKVToken = sol.coef[0], sol.coef[1]
	p.PrefillTokensPerSecond, p.PrefillAttentionSecondsPerKVToken = 1/sol.coef[2], sol.coef[3]
	off := "prior (off): prefill in the batch accounts for the runs better (" + compare + ")"
	return []Param{
		{Field: "prefill_tokens_per_second", Value: p.PrefillTokensPerSecond, SE: sol.se[2] / (sol.coef[2] * sol.coef[2]), Source: timing, Status: Fitted},
		{Field: "prefill_attention_seconds_per_kv_token", Value: p.PrefillAttentionSecondsPerKVToken, SE: sol.se[3], Source: timing, Status: Fitted},
		{Field: "decode_base_seconds", Value: p.DecodeBaseSeconds, SE: sol.se[0], Source: timing, Status: Fitted},
		{Field: "decode_seconds_per_kv_token", Value: p.DecodeSecondsPerKVToken, SE: sol.se[1], Source: timing, Status: Fitted},
		{Field: "request_seconds", Status: Prior, Source: off},
		{Field: "request_seconds_per_prompt_token", Status: Prior, Source: off},
		{Field: "load_slowdown", Status: Prior, Source: "prior (off): not fitted with prefill in the batch, whose context and prompt terms carry the load"},
	}, nil
}

func relText(dec, wait float64, err error) string {
	if err != nil {
		return "no fit"
	}
	return fmt.Sprintf("%.2f + %.2f", dec, wait)
}
