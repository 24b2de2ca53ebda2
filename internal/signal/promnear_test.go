package signal

import (
	"context"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/prometheus/common/model"
)

// TestNearestScrape checks which of a target's scrapes a read at an instant
// takes: the nearer of the last before and the first after (ties to the
// earlier), the last before when none came after, and none for a target
// gone while others are still scraped.
func TestNearestScrape(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s scrapes
	for i := range 4 { // every second, from base to base+3s
		s.at = append(s.at, model.TimeFromUnixNano(base.Add(time.Duration(i)*time.Second).UnixNano()))
		s.up = append(s.up, 1)
	}
	at := func(d time.Duration) time.Time { return base.Add(d) }
	cases := []struct {
		t      time.Duration
		others bool
		want   int
	}{
		{1400 * time.Millisecond, true, 1},  // nearer the one before
		{1600 * time.Millisecond, true, 2},  // nearer the one after: an instant query would give 1
		{1500 * time.Millisecond, true, 1},  // a tie goes to the earlier
		{3 * time.Second, true, 3},          // on a scrape
		{3500 * time.Millisecond, true, 3},  // none after yet: the last before
		{-300 * time.Millisecond, true, 0},  // before the first, within half an interval
		{-700 * time.Millisecond, true, -1}, // before the first, nearer nothing
		{7500 * time.Millisecond, true, -1}, // others scraped since, this one not for waitFor (4 s): gone
		{7500 * time.Millisecond, false, 3}, // nothing scraped since: Prometheus is behind, not the target gone
	}
	if iv := s.interval(); iv != time.Second {
		t.Fatalf("interval %v, want 1s", iv)
	}
	for _, c := range cases {
		if got := s.nearest(at(c.t), c.others); got != c.want {
			t.Errorf("read at %v (others scraped after: %v): scrape %d, want %d", c.t, c.others, got, c.want)
		}
	}
}

// growingQuerier answers as Prometheus would at the fake time *now: only
// the scrapes made by then.
type growingQuerier struct {
	fakeQuerier
	now *time.Time
	all []time.Time
}

func (g *growingQuerier) Query(ctx context.Context, q string, ts time.Time) (model.Value, []string, error) {
	g.times = g.times[:0]
	for _, t := range g.all {
		if !t.After(*g.now) {
			g.times = append(g.times, t)
		}
	}
	return g.fakeQuerier.Query(ctx, q, ts)
}

// TestAReadWaitsForATargetScrapedOnce: read just after Prometheus first
// scraped the target (one scrape, no interval yet), a read at 7 s took that
// first scrape, 200 ms before the instant, though the next one came 50 ms
// after it: the first step's first window edge lagged. The read now looks
// for the second scrape for two seconds and takes the nearer one.
func TestAReadWaitsForATargetScrapedOnce(t *testing.T) {
	clock, _ := timescale.New(1)
	w := clock.Wall(7 * time.Second)
	now := w.Add(10 * time.Millisecond)
	vec := vectorOf(t, string(readTestdata(t)), model.LabelSet{"job": "vllm", "instance": "10.0.0.1:8000"})
	g := &growingQuerier{fakeQuerier: fakeQuerier{vec: vec}, now: &now, all: []time.Time{w.Add(-200 * time.Millisecond), w.Add(50 * time.Millisecond)}}
	slept := time.Duration(0)
	p := &Prometheus{API: g, Selector: `{job="vllm"}`, Mapping: VLLM(), Clock: clock,
		Now:   func() time.Time { return now },
		Sleep: func(_ context.Context, d time.Duration) error { now, slept = now.Add(d), slept+d; return nil }}
	s, err := p.Scrape(context.Background(), 7*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s.At < 7049*time.Millisecond || s.At > 7050*time.Millisecond || slept <= 0 || slept > 2*time.Second {
		t.Errorf("read at 7 s: the scrape at %v after waiting %v, want the one at 7.05 s after waiting under 2 s", s.At, slept)
	}
}

// TestNearestScrapeSkipsFailedOnes: a failed scrape (up 0, a timeout on a
// loaded host) holds no series, and a read whose nearest scrape it was read
// no data for that target ("no series match" with one target). The nearest
// scrape that worked is read instead, when within waitFor; a target down for
// longer still reads its failed scrape (down).
func TestNearestScrapeSkipsFailedOnes(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s scrapes
	for i, up := range []float64{1, 1, 0, 1, 0, 0, 0, 0, 0, 0} { // every second
		s.at = append(s.at, model.TimeFromUnixNano(base.Add(time.Duration(i)*time.Second).UnixNano()))
		s.up = append(s.up, up)
	}
	for _, c := range []struct {
		t    time.Duration
		want int
	}{
		{1900 * time.Millisecond, 1}, // 2 failed: 1 is 0.9 s away, 3 is 1.1 s
		{2200 * time.Millisecond, 3}, // 2 failed: 3 is nearer than 1
		{3 * time.Second, 3},         // on a scrape that worked
		{4200 * time.Millisecond, 3}, // 4 failed: 3 worked 1.2 s before
		{9 * time.Second, 9},         // failed for 6 s, over waitFor (4 s): down
	} {
		if got := s.nearest(base.Add(c.t), false); got != c.want {
			t.Errorf("read at %v: scrape %d, want %d", c.t, got, c.want)
		}
	}
}
