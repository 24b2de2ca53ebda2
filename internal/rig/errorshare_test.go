package rig

import (
	"math"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
)

// TestLastWindowErrorShare: headroom_error_rate was always NaN (rig passed
// NaN); it is now the last window's share of the requests the server
// ended in an error, and NaN only without outcome counters or requests.
func TestLastWindowErrorShare(t *testing.T) {
	lastWindowErrorShare := func(samples []signal.Sample, window time.Duration) float64 {
		w, ok := lastWindow(samples, window)
		if !ok {
			t.Fatalf("%d samples over %v: no last window", len(samples), window)
		}
		return windowErrorShare(w)
	}
	at := func(s int, ok, r4xx, r5xx, aborted float64) signal.Sample {
		return signal.Sample{At: time.Duration(s) * time.Second, Counter: map[string]float64{
			signal.RequestsOK: ok, signal.HTTP4xx: r4xx, signal.HTTP5xx: r5xx, signal.RequestsAborted: aborted}}
	}
	samples := []signal.Sample{at(0, 0, 0, 0, 0), at(30, 90, 5, 0, 0), at(60, 180, 6, 2, 2)}
	// last 30 s window: 90 ok, 1 4xx, 2 5xx, 2 aborted -> 5 of 95
	if got := lastWindowErrorShare(samples, 30*time.Second); math.Abs(got-5.0/95) > 1e-12 {
		t.Errorf("error share %g, want %g", got, 5.0/95)
	}
	quiet := []signal.Sample{at(0, 10, 0, 0, 0), at(30, 10, 0, 0, 0)}
	if got := lastWindowErrorShare(quiet, 30*time.Second); !math.IsNaN(got) {
		t.Errorf("no request ended: %g, want NaN", got)
	}
	bare := []signal.Sample{{At: 0, Counter: map[string]float64{}}, {At: 30 * time.Second, Counter: map[string]float64{}}}
	if got := lastWindowErrorShare(bare, 30*time.Second); !math.IsNaN(got) {
		t.Errorf("no outcome counters: %g, want NaN", got)
	}
}
