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

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// scaledRun is what one run of the fixed workload gave, judged from the
// simulator's metrics the way a sweep step is.
type scaledRun struct {
	ttftBucket, interBucket [2]float64
	verdicts                []verdict.Verdict // one per bar in scaleBars
	sent, failed            int
}

// scaleBars are judged on every run: one the workload passes easily and
// one it fails on TTFT. The error bar sits above the Wilson upper bound of
// 0 errors in the run's 20 turns (16%), which is all 20 turns can show.
var scaleBars = []verdict.Bar{
	{TTFTP90: 5, InteractivityP90: 3, ErrorRate: 0.25},
	{TTFTP90: 0.5, InteractivityP90: 3, ErrorRate: 0.25},
}

// runScaled drives a small open-loop workload for `modelled` of modelled
// time against a fresh simulator: on the virtual clock over the in-memory
// network when scale is 0, else on a wall clock of that scale over
// loopback TCP. Four lanes each send a fresh 900-word prompt for a
// 30-token answer every 2 modelled seconds, staggered by half a second, so
// prefills queue behind each other. The client paces itself on the same
// clock, scrapes /metrics every 2 modelled seconds and judges the whole
// run as one step.
func runScaled(t *testing.T, scale float64, modelled time.Duration) scaledRun {
	t.Helper()
	p := tinyProfile()
	p.PrefillTokensPerSecond = prefillRate
	opts := Options{Profile: p, Scale: scale, Seed: 11}
	clock, client, addr := (*timescale.Clock)(nil), http.DefaultClient, "127.0.0.1:0"
	if scale == 0 {
		clock = timescale.NewVirtual()
		net := memnet.New(clock)
		opts.Clock, opts.Net, client, addr = clock, net, net.Client(), ""
	} else {
		clock, _ = timescale.New(scale)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var out scaledRun
	clock.Run(func() {
		url, err := s.Start(addr)
		if err != nil {
			t.Error(err)
			return
		}
		out = driveScaled(t, clock, client, url, modelled)
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return out
}

// driveScaled is runScaled's load and judgement, on clock.
func driveScaled(t *testing.T, clock *timescale.Clock, client *http.Client, url string, modelled time.Duration) scaledRun {
	ctx := context.Background()
	// A first request makes http_requests_total exist, as a warm-up would.
	if resp, err := client.Get(url + "/v1/models"); err == nil {
		resp.Body.Close()
	}
	scraper := &signal.Scraper{Targets: []string{url + "/metrics"}, Mapping: signal.VLLM(), Client: client, Sequential: clock.Virtual()}

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
	g := clock.NewGroup()
	var mu sync.Mutex
	sent, failed := 0, 0
	for lane := range lanes {
		g.Go(func() {
			for k := 0; ; k++ {
				at := time.Duration(lane)*period/lanes + time.Duration(k)*period
				if at >= modelled {
					return
				}
				_ = clock.SleepUntil(ctx, at)
				g.Go(func() {
					ok := drive(client, url, chatJSON("tiny-model", words(fmt.Sprintf("L%dk%d-", lane, k), 0, promptWords), 30, true))
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
	_ = g.Wait(ctx)
	// One last scrape once every answer is in, closing the last window.
	smp, err := scraper.Scrape(ctx, clock.Now())
	if err != nil {
		t.Error(err)
		return scaledRun{}
	}
	samples = append(samples, smp)
	out := scaledRun{sent: sent, failed: failed}
	end := samples[len(samples)-1].At
	windows := signal.Windows(samples, 0, end, period)
	load := make([]verdict.LoadWindow, len(windows))
	for i := range load {
		// Every planned turn went out, spread evenly over the windows.
		n := sent/len(load) + min(1, max(0, sent%len(load)-i))
		load[i] = verdict.LoadWindow{Planned: n, Sent: n}
	}
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
func drive(client *http.Client, url string, body []byte) bool {
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte("[DONE]"))
}

// TestScaleKeepsVerdicts: the verdicts and P90 buckets of the fixed
// workload are judged on the virtual clock, where no host load reaches
// them: pass against the loose bar, fail on TTFT against the 0.5 s bar, the
// same on a second run of the same seed. The scaled wall clock (the
// rehearsal's) serves the same workload whole; its latencies depend on how
// busy the host is, so only what does not is checked there: every request
// sent and answered.
func TestScaleKeepsVerdicts(t *testing.T) {
	const modelled = 10 * time.Second
	virt, again := runScaled(t, 0, modelled), runScaled(t, 0, modelled)
	t.Logf("virtual: TTFT P90 bucket %v, interactivity %v, verdicts %v, %d requests", virt.ttftBucket, virt.interBucket, virt.verdicts, virt.sent)
	if virt.sent != 20 || virt.failed != 0 {
		t.Errorf("virtual clock: %d requests sent, %d failed, want 20 and 0", virt.sent, virt.failed)
	}
	if len(virt.verdicts) != len(scaleBars) || virt.verdicts[0] != verdict.Pass || virt.verdicts[1] != verdict.Fail {
		t.Errorf("verdicts %v, want pass against the loose bar and fail against the 0.5 s TTFT bar", virt.verdicts)
	}
	if virt.ttftBucket != [2]float64{1, 2.5} || virt.interBucket[0] != 5 {
		t.Errorf("P90 TTFT bucket %v, interactivity bucket %v: want (1, 2.5] and from 5 tok/s", virt.ttftBucket, virt.interBucket)
	}
	if fmt.Sprint(virt) != fmt.Sprint(again) {
		t.Errorf("the same seed on the virtual clock gave %+v, then %+v", virt, again)
	}
	if testing.Short() {
		return
	}
	// 10 modelled seconds at x10: one wall second
	wall := runScaled(t, min(fastScale, 10), modelled)
	if wall.sent != 20 || wall.failed != 0 {
		t.Errorf("scaled wall clock: %d requests sent, %d failed, want 20 and 0", wall.sent, wall.failed)
	}
}
