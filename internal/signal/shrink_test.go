package signal

import (
	"strings"
	"testing"
	"time"
)

// A series that shrinks with no restart (every value scaled down by a
// proxy) or moves by a fraction of a count leaves its window with no data
// for it, with a warning naming it; a restart (a drop to what one scrape
// counts) still counts from zero.
func TestShrinkingSeriesIsNoData(t *testing.T) {
	// 10 first tokens a scrape from a long history (1000 before the run)
	grow := func(sec int, scale float64) Sample {
		n := (1000 + float64(sec)) * scale
		s := sample(sec, float64(sec)*scale, n, 10*n, 1)
		s.Counter[RequestsOK] = n
		return s
	}
	steady := []Sample{grow(0, 1), grow(10, 1), grow(20, 1), grow(30, 1), grow(40, 1)}
	// from 20 s on every value is 0.35x: a drop to far more than a restart
	// counts in one scrape, and fractional counts after
	scaled := []Sample{grow(0, 1), grow(10, 1), grow(20, 0.35), grow(30, 0.35), grow(40, 0.35)}
	// 0.5x from 20 s: whole numbers, so only the drop tells it
	halved := []Sample{grow(0, 1), grow(10, 1), grow(20, 0.5), grow(30, 0.5), grow(40, 0.5)}
	// a restart between 10 s and 20 s: 4 counted since, then 10 a scrape
	restart := []Sample{grow(0, 1), grow(10, 1), sample(20, 2, 4, 40, 1), sample(30, 7, 14, 140, 1), sample(40, 12, 24, 240, 1)}
	for i, v := range []float64{4, 14, 24} {
		restart[2+i].Counter[RequestsOK] = v
	}
	cases := []struct {
		name     string
		samples  []Sample
		noData   []bool // per 10 s window: TTFT and requests_ok left out
		warnings []string
	}{
		{"steady", steady, []bool{false, false, false, false}, nil},
		{"scaled by 0.35", scaled, []bool{false, true, true, true}, []string{"ttft_seconds", "requests_ok", "shrank with no restart", "a fraction of a count"}},
		{"halved", halved, []bool{false, true, false, false}, []string{"shrank with no restart"}},
		{"restart", restart, []bool{false, false, false, false}, []string{"engine restart?"}},
	}
	for _, c := range cases {
		ws := Windows(c.samples, 0, 40*time.Second, 10*time.Second)
		if len(ws) != len(c.noData) {
			t.Fatalf("%s: %d windows, want %d", c.name, len(ws), len(c.noData))
		}
		var all []string
		for i, w := range ws {
			_, hasTTFT := w.Hist[TTFT]
			_, hasOK := w.Counter[RequestsOK]
			t.Logf("%s: window %d ttft %v (count %g), requests_ok %v (%g): %q", c.name, i, hasTTFT, w.Hist[TTFT].Count, hasOK, w.Counter[RequestsOK], w.Warnings)
			if hasTTFT == c.noData[i] || hasOK == c.noData[i] {
				t.Errorf("%s: window %d has ttft %v, requests_ok %v; want no data %v", c.name, i, hasTTFT, hasOK, c.noData[i])
			}
			all = append(all, w.Warnings...)
		}
		text := strings.Join(all, "\n")
		for _, want := range c.warnings {
			if !strings.Contains(text, want) {
				t.Errorf("%s: no warning says %q: %q", c.name, want, all)
			}
		}
		if c.warnings == nil && len(all) > 0 {
			t.Errorf("%s: warnings %q, want none", c.name, all)
		}
	}
}
