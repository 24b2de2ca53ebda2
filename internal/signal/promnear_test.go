package signal

import (
	"testing"
	"time"

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
