package calibrate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sim"
)

// Statuses of a fitted profile's field: what pinned its value.
const (
	Fitted = "fitted" // the runs' records and scrapes pin it
	Given  = "given"  // the recipe's args or the served context say it
	Bound  = "bound"  // the runs show only a bound; the value keeps clear of it
	Prior  = "prior"  // the runs cannot tell: the default profile's value (or the term off)
)

// minShortShare is the share of answers that must end before max_tokens
// for their lengths to be a distribution worth modelling.
const minShortShare = 0.2

// fitAnswers is the distribution of answer lengths over max_tokens from
// the records that were allowed more than one token.
func fitAnswers(runs []Run) (sim.Quantiles, Param) {
	var fr []float64
	short := 0
	for _, r := range runs {
		for _, rec := range r.Records {
			if rec.Failed() || rec.MaxTokens <= 1 || rec.OutputTokens < 1 {
				continue
			}
			f := min(1, float64(rec.OutputTokens)/float64(rec.MaxTokens))
			fr = append(fr, f)
			if rec.OutputTokens < rec.MaxTokens {
				short++
			}
		}
	}
	p := Param{Field: "answer_fractions", Status: Prior}
	if len(fr) < 30 || float64(short) < minShortShare*float64(len(fr)) {
		p.Source = fmt.Sprintf("off: %d of %d answers ended before max_tokens (under %.0f%%, or too few answers): every answer runs to max_tokens", short, len(fr), 100*minShortShare)
		return sim.Quantiles{}, p
	}
	sort.Float64s(fr)
	var q sim.Quantiles
	for i := range q {
		q[i] = max(1e-6, quantileSorted(fr, float64(i)/float64(len(q)-1)))
	}
	mean := 0.0
	for _, f := range fr {
		mean += f
	}
	mean /= float64(len(fr))
	p.Value, p.Status = mean, Fitted
	p.Source = fmt.Sprintf("fitted: the quantiles of output over max_tokens of %d answers, %d of them shorter (the value is their mean; median %.2f)", len(fr), short, q[10])
	return q, p
}

func quantileSorted(v []float64, u float64) float64 {
	pos := u * float64(len(v)-1)
	i := min(int(pos), len(v)-2)
	if len(v) == 1 {
		return v[0]
	}
	return v[i] + (v[i+1]-v[i])*(pos-float64(i))
}

// fitPrefixCaching says whether the engine had a prefix cache: a prompt
// that repeats an earlier one's start (the trace's ideal cached tokens)
// was served with some tokens cached, or never.
func fitPrefixCaching(runs []Run) (off bool, p Param) {
	repeat, hit := 0, 0
	for _, r := range runs {
		for _, rec := range r.Records {
			if rec.Failed() || rec.IdealCachedTokens < 64 {
				continue
			}
			repeat++
			if rec.CachedTokens > 0 {
				hit++
			}
		}
	}
	p = Param{Field: "no_prefix_caching"}
	switch {
	case repeat < 20:
		p.Status = Prior
		p.Source = fmt.Sprintf("prior (caching on): %d requests repeated an earlier prompt's start, too few to tell", repeat)
	case hit == 0:
		p.Status, p.Value, off = Fitted, 1, true
		p.Source = fmt.Sprintf("fitted: none of %d requests that repeated an earlier prompt's start had a cached token", repeat)
	default:
		p.Status = Fitted
		p.Source = fmt.Sprintf("fitted (caching on): %d of %d requests that repeated an earlier prompt's start had tokens cached", hit, repeat)
	}
	return off, p
}

// queueInTTFT tells from the scrapes whether the engine's TTFT series
// counts the request's time in the queue: interval by interval the
// client's TTFTs less the engine's are the trip into the engine (fitted as
// fixed seconds plus seconds per prompt token) or that plus the engine's
// queue time. ok is false when the runs queued too little to tell.
type queueRow struct {
	n, prompt, diff, queue float64
}

func decideQueue(rows []queueRow) (fromAdmission, ok bool, note string) {
	var q, c float64
	for _, r := range rows {
		q += r.queue
		c += math.Abs(r.diff)
	}
	if len(rows) < 5 || q < 1 || q < 0.05*c {
		return false, false, fmt.Sprintf("prior (queue time counted, as vLLM does): the runs queued %.1f s in all, too little to tell whether the engine's TTFT counts it", q)
	}
	rss := func(sub float64) float64 {
		var x [][]float64
		var y []float64
		for _, r := range rows {
			x, y = append(x, []float64{r.n, r.prompt}), append(y, r.diff-sub*r.queue)
		}
		sol, err := fitNonNegative(x, y)
		if err != nil {
			// no non-negative trip fits: the residual is the whole difference
			ss := 0.0
			for _, v := range y {
				ss += v * v
			}
			return ss
		}
		return sol.rms * sol.rms
	}
	with, without := rss(0), rss(1)
	if without < with {
		return true, true, fmt.Sprintf("fitted: over %d scrape intervals the client's TTFT less the engine's holds the engine's %.0f s of queue time (residual %.3g against %.3g with the queue inside)", len(rows), q, math.Sqrt(without), math.Sqrt(with))
	}
	return false, true, fmt.Sprintf("fitted (queue time counted): over %d scrape intervals the engine's TTFT holds its %.0f s of queue time (residual %.3g against %.3g with it left out)", len(rows), q, math.Sqrt(with), math.Sqrt(without))
}

// kvBound is the KV capacity to give an engine whose usage gauge never
// moved off zero while requests held tokens: the run shows only that the
// cache is far larger than what was held, so the profile gets room for
// four times the most the requests held, and at least its prior.
func kvBound(runs []Run, spans [][]span, block, prior int) (int, string, bool) {
	zero, peak := 0, 0.0
	for i, r := range runs {
		for _, s := range r.Samples {
			u, ok := s.Gauge[signal.KVCacheUsage]
			if !ok || math.IsNaN(u) {
				continue
			}
			if u >= 0.02 {
				return 0, "", false
			}
			if tok := resident(spans[i], s.At.Seconds(), block); tok > 0 {
				zero++
				peak = max(peak, tok)
			}
		}
	}
	if zero < 3 {
		return 0, "", false
	}
	kv := max(prior, int(math.Ceil(4*peak/float64(block)))*block)
	return kv, fmt.Sprintf("bound: the KV-usage gauge read under 2%% in %d scrapes while the requests held up to %.0f tokens, so the cache is at least 50 times that; set to %d so that it does not bind", zero, peak, kv), true
}

// statusOf is the status of an engine limit from where it came.
func statusOf(from string) string {
	switch {
	case strings.HasPrefix(from, "fitted"):
		return Fitted
	case strings.HasPrefix(from, "the default profile"):
		return Prior
	}
	return Given
}
