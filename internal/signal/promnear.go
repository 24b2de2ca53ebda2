package signal

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
)

// A sample read through Prometheus at an instant t holds, for each target,
// what Prometheus scraped from it at its scrape nearest to t: the last one
// at or before t or the first one after it, whichever is closer (ties to
// the earlier), as a Scraper reading the target at t would see it, give or
// take half of Prometheus' scrape interval either way. An instant query at
// t would give the last scrape before t instead, up to a whole interval
// old and always older: every window's edges moved back by that lag, a
// step's first window took in the end of its warm-up, and a window whose
// two edges fell on the same scrape read nothing (issue 22.9).
//
// The scrape after t exists only once Prometheus has made it, so reading
// an instant that has just passed waits for it: at most twice the target's
// scrape interval (from the spacing of its up series) and two seconds; a
// target scraped only once so far (no spacing yet) is waited for two
// seconds, or a read just after Prometheus started would take its first
// scrape, however far before the instant it was. A
// target with no scrape after t by then reads its last one before t; one
// whose last scrape is older than that, while other targets were scraped
// after t, has gone and is left out.

// lookback is how far back a scrape before an instant is looked for while a
// target's scrape interval is not known: Prometheus' default lookback.
const lookback = 5 * time.Minute

// targetKey names a scrape target as Prometheus labels it.
type targetKey [2]model.LabelValue

func targetOf(m model.Metric) targetKey { return targetKey{m["job"], m["instance"]} }

// scrapes is one target's scrape times (its up series) and their up values.
type scrapes struct {
	at []model.Time
	up []float64
}

// interval is the target's scrape interval: the median spacing of its
// scrapes, 0 with fewer than two.
func (s scrapes) interval() time.Duration {
	if len(s.at) < 2 {
		return 0
	}
	d := make([]time.Duration, 0, len(s.at)-1)
	for i := 1; i < len(s.at); i++ {
		d = append(d, s.at[i].Time().Sub(s.at[i-1].Time()))
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// waitFor is how long after an instant a target's next scrape is waited
// for: twice its interval and two seconds.
func (s scrapes) waitFor() time.Duration { return 2*s.interval() + 2*time.Second }

// after reports whether the target was scraped after t.
func (s scrapes) after(t time.Time) bool {
	return len(s.at) > 0 && s.at[len(s.at)-1] > model.TimeFromUnixNano(t.UnixNano())
}

// nearest returns the index of the scrape nearest t, -1 when the target had
// none near t. A failed scrape (up 0: a timeout on a loaded host) holds no
// series: the nearest scrape that worked is taken instead when it is within
// waitFor of t, as a scraper at t would have read the target; a target whose
// scrapes failed longer than that reads down.
func (s scrapes) nearest(t time.Time, others bool) int {
	j := s.nearestAny(t, others)
	if j < 0 || len(s.up) != len(s.at) || s.up[j] != 0 {
		return j
	}
	best := -1
	var bestD time.Duration
	for _, k := range []int{s.upFrom(j, -1), s.upFrom(j, 1)} {
		if k < 0 {
			continue
		}
		d := s.at[k].Time().Sub(t)
		if d < 0 {
			d = -d
		}
		if d <= s.waitFor() && (best < 0 || d < bestD) {
			best, bestD = k, d
		}
	}
	if best < 0 {
		return j
	}
	return best
}

// upFrom is the first scrape from j on, stepping by dir, that worked; -1
// when there is none.
func (s scrapes) upFrom(j, dir int) int {
	for k := j; k >= 0 && k < len(s.at); k += dir {
		if s.up[k] != 0 {
			return k
		}
	}
	return -1
}

// nearestAny returns the index of the scrape nearest t, failed or not, -1
// when the target had none near t. others says whether another target was scraped after t: a
// target that was not, while others were, is taken as gone once its last
// scrape is waitFor old; while none was (Prometheus itself behind), its
// last scrape holds for lookback, as an instant query's would.
func (s scrapes) nearestAny(t time.Time, others bool) int {
	mt := model.TimeFromUnixNano(t.UnixNano())
	k, _ := slices.BinarySearch(s.at, mt+1) // first scrape after t
	before, next := k-1, k
	if next == len(s.at) {
		next = -1
	}
	stale := lookback
	if others && s.interval() > 0 {
		stale = s.waitFor()
	}
	if before >= 0 && next < 0 && t.Sub(s.at[before].Time()) > stale {
		before = -1
	}
	switch {
	case next < 0:
		return before
	case before < 0:
		// the target's first scrape came after t: a scraper at t would not
		// have read it yet unless that scrape is the nearer half
		if iv := s.interval(); iv > 0 && s.at[next].Time().Sub(t) <= iv/2 {
			return next
		}
		return -1
	case s.at[next].Time().Sub(t) < t.Sub(s.at[before].Time()):
		return next
	}
	return before
}

// upSelector is the selector of the up series under p's selector.
func (p *Prometheus) upSelector() (string, error) {
	inner, err := matchersOf(p.Selector)
	if err != nil {
		return "", err
	}
	if inner == "" {
		return "up", nil
	}
	return "up{" + inner + "}", nil
}

// rangeSel appends a range of d (at least a millisecond) to a selector.
func rangeSel(sel string, d time.Duration) string {
	return sel + "[" + strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms]"
}

// matrix runs an instant query of a range selector at ts.
func (p *Prometheus) matrix(ctx context.Context, q string, ts time.Time) (model.Matrix, []string, error) {
	v, warnings, err := p.API.Query(ctx, q, ts)
	if err != nil {
		return nil, warnings, fmt.Errorf("prometheus query %s: %w", q, err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, warnings, fmt.Errorf("prometheus query %s returned a %s, want a matrix", q, v.Type())
	}
	return m, warnings, nil
}

// targetScrapes reads every target's scrapes from first-lookback on.
func (p *Prometheus) targetScrapes(ctx context.Context, first time.Time) (map[targetKey]scrapes, []string, error) {
	sel, err := p.upSelector()
	if err != nil {
		return nil, nil, err
	}
	now := p.now()
	end := now
	if first.After(end) {
		end = first
	}
	m, warnings, err := p.matrix(ctx, rangeSel(sel, end.Sub(first)+lookback), end)
	if err != nil {
		return nil, warnings, err
	}
	out := map[targetKey]scrapes{}
	for _, series := range m {
		k := targetOf(series.Metric)
		s := out[k]
		for _, v := range series.Values {
			s.at = append(s.at, v.Timestamp)
			s.up = append(s.up, float64(v.Value))
		}
		out[k] = s
	}
	for k, s := range out {
		// one up series per target; sorted in case relabelling gave two
		idx := make([]int, len(s.at))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return int(s.at[a] - s.at[b]) })
		sorted := scrapes{}
		for _, i := range idx {
			if n := len(sorted.at); n > 0 && sorted.at[n-1] == s.at[i] {
				continue
			}
			sorted.at, sorted.up = append(sorted.at, s.at[i]), append(sorted.up, s.up[i])
		}
		out[k] = sorted
	}
	return out, warnings, nil
}

// now is the wall time; tests may set Now.
func (p *Prometheus) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// sleep waits d or until ctx ends; tests may set Sleep.
func (p *Prometheus) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// awaitScrapes reads the targets' scrapes, waiting until each target has
// been scraped after last or its wait is over (twice its interval and a
// second after last). Targets seen only before first-lookback are not read.
func (p *Prometheus) awaitScrapes(ctx context.Context, first, last time.Time) (map[targetKey]scrapes, []string, error) {
	for {
		ts, warnings, err := p.targetScrapes(ctx, first)
		if err != nil {
			return nil, warnings, err
		}
		now := p.now()
		var wake time.Time
		for _, s := range ts {
			n := len(s.at)
			iv := s.interval()
			if n == 0 || s.at[n-1].Time().After(last) {
				continue // scraped after last
			}
			if now.Sub(last) > s.waitFor() || last.Sub(s.at[n-1].Time()) > lookback {
				continue // waited long enough, or gone
			}
			// a target scraped once has no interval yet: its second scrape
			// is looked for every 100 ms, for the two seconds waitFor gives
			next := now.Add(100 * time.Millisecond)
			if iv > 0 {
				next = s.at[n-1].Time().Add(iv + 20*time.Millisecond)
				if next.Before(now) {
					next = now.Add(min(iv/4, 100*time.Millisecond))
				}
			}
			if wake.IsZero() || next.Before(wake) {
				wake = next
			}
		}
		if wake.IsZero() {
			return ts, warnings, nil
		}
		if err := p.sleep(ctx, wake.Sub(now)); err != nil {
			return nil, warnings, err
		}
	}
}

// nearestPoints reads, for each instant (sorted wall times), every series
// under the selector at its target's scrape nearest that instant, and when
// those scrapes were made: their mean time, the instant itself where no
// target was scraped near it.
func (p *Prometheus) nearestPoints(ctx context.Context, instants []time.Time) ([][]point, []time.Time, []string, error) {
	out := make([][]point, len(instants))
	scraped := slices.Clone(instants)
	if len(instants) == 0 {
		return out, scraped, nil, nil
	}
	ts, warnings, err := p.awaitScrapes(ctx, instants[0], instants[len(instants)-1])
	if err != nil {
		return nil, nil, warnings, err
	}
	// chosen[i][target] is the scrape read for instant i
	chosen := make([]map[targetKey]model.Time, len(instants))
	var lo, hi model.Time
	for i, t := range instants {
		chosen[i] = map[targetKey]model.Time{}
		scrapedAfter := 0
		for _, s := range ts {
			if s.after(t) {
				scrapedAfter++
			}
		}
		var off time.Duration // sum of the chosen scrapes' offsets from t
		for k, s := range ts {
			others := scrapedAfter > 1 || (scrapedAfter == 1 && !s.after(t))
			j := s.nearest(t, others)
			if j < 0 {
				continue
			}
			at := s.at[j]
			chosen[i][k] = at
			off += at.Time().Sub(t)
			if lo == 0 || at < lo {
				lo = at
			}
			hi = max(hi, at)
		}
		if n := len(chosen[i]); n > 0 {
			scraped[i] = t.Add(off / time.Duration(n))
		}
	}
	if hi == 0 {
		return out, scraped, warnings, nil
	}
	q, err := p.query()
	if err != nil {
		return nil, nil, warnings, err
	}
	end := hi.Time().Add(time.Millisecond)
	m, w2, err := p.matrix(ctx, rangeSel(q, end.Sub(lo.Time())+time.Millisecond), end)
	warnings = append(warnings, w2...)
	if err != nil {
		return nil, nil, warnings, err
	}
	for _, series := range m {
		k := targetOf(series.Metric)
		for i := range instants {
			at, ok := chosen[i][k]
			if !ok {
				continue
			}
			j, found := slices.BinarySearchFunc(series.Values, at, func(v model.SamplePair, t model.Time) int { return int(v.Timestamp - t) })
			if found {
				out[i] = append(out[i], point{series.Metric, float64(series.Values[j].Value)})
			}
		}
	}
	return out, scraped, warnings, nil
}
