package sim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// scaledRun is what one run of the fixed workload gave, judged from the
// simulator's metrics the way a sweep step is.
type scaledRun struct {
	ttftBucket, interBucket [2]float64
	verdicts                []verdict.Verdict // one per bar in scaleBars
	sent                    int
}

// scaleBars are judged on every run: one the workload passes easily and
// one it fails on TTFT. The error bar sits above the Wilson upper bound of
// 0 errors in the run's 20 turns (16%), which is all 20 turns can show.
var scaleBars = []verdict.Bar{
	{TTFTP90: 5, InteractivityP90: 3, ErrorRate: 0.25},
	{TTFTP90: 0.5, InteractivityP90: 3, ErrorRate: 0.25},
}

// runScaled drives a small open-loop workload for `modelled` of modelled
// time against a fresh simulator at the given scale: four lanes, each
// sending a fresh 900-word prompt for a 30-token answer every 2 modelled
// seconds, staggered by half a second, so prefills queue behind each other.
// The client paces itself on a clock of the same scale, scrapes /metrics
// every 2 modelled seconds and judges the whole run as one step.
func runScaled(t *testing.T, scale float64, modelled time.Duration) scaledRun {
	t.Helper()
	p := tinyProfile()
	p.PrefillTokensPerSecond = prefillRate
	s, err := New(Options{Profile: p, Scale: scale, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clock, _ := timescale.New(scale)
	ctx := context.Background()
	// A first request makes http_requests_total exist, as a warm-up would.
	if resp, err := http.Get(url + "/v1/models"); err == nil {
		resp.Body.Close()
	}
	scraper := &signal.Scraper{Targets: []string{url + "/metrics"}, Mapping: signal.VLLM()}

	var samples []signal.Sample
	scrapeAt := func(at time.Duration) {
		_ = clock.SleepUntil(ctx, at)
		smp, err := scraper.Scrape(ctx, at)
		if err != nil {
			t.Errorf("scrape at %v: %v", at, err)
			return
		}
		samples = append(samples, smp)
	}
	const period, lanes = 2 * time.Second, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent, failed := 0, 0
	for lane := range lanes {
		wg.Go(func() {
			for k := 0; ; k++ {
				at := time.Duration(lane)*period/lanes + time.Duration(k)*period
				if at >= modelled {
					return
				}
				_ = clock.SleepUntil(ctx, at)
				wg.Go(func() {
					ok := drive(url, chatJSON("tiny-model", words(fmt.Sprintf("L%dk%d-", lane, k), 0, promptWords), 30, true))
					mu.Lock()
					sent++
					if !ok {
						failed++
					}
					mu.Unlock()
				})
			}
		})
	}
	for at := time.Duration(0); at <= modelled; at += period {
		scrapeAt(at)
	}
	wg.Wait()
	// One last scrape once every answer is in, closing the last window.
	smp, err := scraper.Scrape(ctx, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	samples = append(samples, smp)
	if failed > 0 {
		t.Fatalf("%d of %d requests failed", failed, sent)
	}
	end := samples[len(samples)-1].At
	windows := signal.Windows(samples, 0, end, period)
	load := make([]verdict.LoadWindow, len(windows))
	for i := range load {
		// Every planned turn went out, spread evenly over the windows.
		n := sent/len(load) + min(1, max(0, sent%len(load)-i))
		load[i] = verdict.LoadWindow{Planned: n, Sent: n}
	}
	out := scaledRun{sent: sent}
	for _, bar := range scaleBars {
		st := verdict.Judge(bar, windows, load, verdict.DefaultOptions())
		out.verdicts = append(out.verdicts, st.Verdict)
		ttft, _ := st.Part(verdict.PartTTFT)
		inter, _ := st.Part(verdict.PartInteractivity)
		out.ttftBucket, out.interBucket = ttft.Bucket, inter.Bucket
	}
	return out
}

// The workload's prefill rate and prompt size: P90 TTFT lands in the
// 1-2.5 s bucket and P90 interactivity in 5-6.7 tokens/s.
const prefillRate, promptWords = 3000.0, 900

// drive sends one request and reads the whole answer.
func drive(url string, body []byte) bool {
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte("[DONE]"))
}

// TestScaleKeepsVerdicts runs the same workload in real time and 50 times
// faster: the P90 TTFT and interactivity buckets read from the metrics, and
// the verdicts against two bars, must be the same.
func TestScaleKeepsVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 10 s of real time")
	}
	const modelled = 10 * time.Second
	// At fastScale (50) a loaded host's late scrape turned a window into no
	// data; 10 still shows scale invariance, with 100 ms of wall time per
	// modelled second. (Runs that must not depend on the host at all use the
	// virtual clock.)
	const fast = min(fastScale, 10)
	runs := map[float64]scaledRun{}
	var mu sync.Mutex
	t.Run("runs", func(t *testing.T) {
		for _, scale := range []float64{1, fast} {
			t.Run(fmt.Sprintf("scale %g", scale), func(t *testing.T) {
				t.Parallel()
				r := runScaled(t, scale, modelled)
				mu.Lock()
				runs[scale] = r
				mu.Unlock()
			})
		}
	})
	real, fastRun := runs[1], runs[fast]
	t.Logf("scale 1: TTFT P90 bucket %v, interactivity %v, verdicts %v, %d requests", real.ttftBucket, real.interBucket, real.verdicts, real.sent)
	t.Logf("scale %g: TTFT P90 bucket %v, interactivity %v, verdicts %v, %d requests", fast, fastRun.ttftBucket, fastRun.interBucket, fastRun.verdicts, fastRun.sent)
	if real.sent != fastRun.sent || real.sent != 20 {
		t.Errorf("requests sent %d and %d, want 20 each", real.sent, fastRun.sent)
	}
	if real.ttftBucket != fastRun.ttftBucket {
		t.Errorf("P90 TTFT bucket %v at scale 1, %v at scale %g", real.ttftBucket, fastRun.ttftBucket, fast)
	}
	if real.interBucket != fastRun.interBucket {
		t.Errorf("P90 interactivity bucket %v at scale 1, %v at scale %g", real.interBucket, fastRun.interBucket, fast)
	}
	for i := range scaleBars {
		if real.verdicts[i] != fastRun.verdicts[i] {
			t.Errorf("bar %+v: verdict %s at scale 1, %s at scale %g", scaleBars[i], real.verdicts[i], fastRun.verdicts[i], fast)
		}
	}
	if real.verdicts[0] != verdict.Pass || real.verdicts[1] != verdict.Fail {
		t.Errorf("verdicts %v, want pass against the loose bar and fail against the 0.5 s TTFT bar", real.verdicts)
	}
}
