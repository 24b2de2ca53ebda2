package sweep

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// laterEngine is the fake engine read at the modelled instant of each
// scrape, its sample handed on a while later (in real time) from a
// goroutine of its own, as signal.Scraper.ScrapeLater does on a virtual
// clock.
type laterEngine struct {
	*fakeEngine
	delay time.Duration
}

func (e laterEngine) ScrapeLater(ctx context.Context, at time.Duration) *signal.Pending {
	s, err := e.Scrape(ctx, at)
	return signal.Later(func() (signal.Sample, error) {
		time.Sleep(e.delay)
		return s, err
	})
}

// sweepOnVirtualClock runs a sweep whose kill switch ends a step, with
// repeats and post-flight, on a virtual clock, and returns its result and
// every sample told to OnSample, as JSON.
func sweepOnVirtualClock(t *testing.T, later bool) (result, samples string) {
	t.Helper()
	r, _, eng := newRunnerEngine(t, []int{2, 4, 6, 8, 10}, 1.2)
	clock := timescale.NewVirtual()
	r.Clock, eng.clock = clock, clock
	r.Plan.Repeat = true
	r.Plan.Kill = Kill{TTFTFactor: 1.5}
	if later {
		r.Source = laterEngine{fakeEngine: eng, delay: 200 * time.Microsecond}
	}
	var told []signal.Sample
	r.OnSample = func(s signal.Sample) { told = append(told, s) }
	var res Result
	var err error
	clock.Run(func() { res, err = r.Run(context.Background()) })
	if err != nil {
		t.Fatal(err)
	}
	a, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(told)
	if err != nil {
		t.Fatal(err)
	}
	if len(told) == 0 || len(told) != len(r.Samples()) {
		t.Errorf("OnSample told %d samples of %d", len(told), len(r.Samples()))
	}
	return string(a), string(b)
}

// Samples worked out after their scrape returned (off the clock, landing
// later in real time) give the sweep exactly what samples worked out at
// once give: the same steps, kill-switch stops, verdicts and capacity, and
// the same samples told to OnSample in the same order.
func TestScrapesWorkedOutLaterReadTheSame(t *testing.T) {
	res, samples := sweepOnVirtualClock(t, false)
	for i := range 2 {
		lres, lsamples := sweepOnVirtualClock(t, true)
		if lres != res {
			t.Errorf("run %d: the result differs with samples worked out later:\n%s\nwant\n%s", i, lres, res)
		}
		if lsamples != samples {
			t.Errorf("run %d: OnSample was told other samples with samples worked out later", i)
		}
	}
}
