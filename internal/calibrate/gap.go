package calibrate

import (
	"sort"

	"github.com/headroom-bench/headroom/internal/signal"
)

// gapModel is the client's TTFT beyond the engine's as a function of the
// prompt: fixed seconds plus seconds per prompt token (the request's body
// is written, read and parsed before the engine sees it).
type gapModel struct {
	fixed, perToken float64
	note            string
	// fromAdmission says the engine's TTFT leaves its queue time out, and
	// queueKnown whether the runs could tell (queueNote says how).
	fromAdmission, queueKnown bool
	queueNote                 string
}

func (g gapModel) at(prompt int) float64 { return g.fixed + g.perToken*float64(prompt) }

// fitGap compares, scrape to scrape, the engine's TTFT histogram with the
// client's TTFTs of the requests whose first token came in between, and
// fits the difference to the prompt sizes. Intervals where the two do not
// count the same requests are left out.
func fitGap(r Run) gapModel {
	name := signal.TTFT
	for _, s := range r.Samples {
		if _, ok := s.Hist[signal.EngineTTFT]; ok {
			name = signal.EngineTTFT
			break
		}
	}
	recs := r.Records
	byFirst := make([]int, 0, len(recs))
	for i, rec := range recs {
		if rec.FirstToken > 0 && !rec.Failed() {
			byFirst = append(byFirst, i)
		}
	}
	sort.Slice(byFirst, func(a, b int) bool { return recs[byFirst[a]].FirstToken < recs[byFirst[b]].FirstToken })
	k := 0
	var qrows []queueRow
	for i := 1; i < len(r.Samples); i++ {
		a, b := r.Samples[i-1], r.Samples[i]
		cnt, sum, good := histDelta(a, b, name)
		_, qsum, qgood := histDelta(a, b, signal.Queue)
		t0, t1 := a.At.Seconds(), b.At.Seconds()
		var n, ttft, prompt float64
		for k < len(byFirst) && recs[byFirst[k]].FirstToken <= t1 {
			rec := recs[byFirst[k]]
			if rec.FirstToken > t0 {
				n++
				ttft += rec.TTFT()
				prompt += float64(rec.ServedPromptTokens)
			}
			k++
		}
		if !good || cnt == 0 || n != cnt {
			continue
		}
		q := queueRow{n: n, prompt: prompt, diff: ttft - sum}
		if qgood {
			// counted when a request leaves the queue (or ends), not at
			// its first token: the sums agree over many intervals
			q.queue = qsum
		}
		qrows = append(qrows, q)
	}
	if len(qrows) < 5 {
		return gapModel{note: "the client's TTFT could not be matched to the engine's (too few scrapes counting the same requests): arrivals are taken at the send times",
			queueNote: "prior (queue time counted, as vLLM does): too few scrapes matched the client's TTFTs to the engine's to tell"}
	}
	g := gapModel{}
	g.fromAdmission, g.queueKnown, g.queueNote = decideQueue(qrows)
	rows := make([][]float64, len(qrows))
	ys := make([]float64, len(qrows))
	for i, q := range qrows {
		rows[i], ys[i] = []float64{q.n, q.prompt}, q.diff
		if g.fromAdmission {
			ys[i] -= q.queue
		}
	}
	sol, err := fitNonNegative(rows, ys)
	if err != nil {
		// no positive gap fits: the client saw the engine's TTFT
		return g
	}
	g.fixed, g.perToken = sol.coef[0], sol.coef[1]
	return g
}
