package load

import (
	"context"
	"fmt"
	"net/http/httptrace"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/prompt"
)

// ratingPrefill is the paced server's wait before the first token in the
// rating benchmark: a long prompt's prefill, which makes a request last
// 1 s + 200 tokens x 20 ms = 5 s, so a stream sends one prompt every 5 s.
const ratingPrefill = time.Second

// BenchmarkPodRating is a load pod's rating for the reference traces'
// prompts (100K and 500K tokens of placeholder text, one word per token,
// about 5.5 bytes per token, written as the body is read as lanes write
// them) against the paced server: at each stream count, held steady, it
// reports the prompt bytes the client sent per second, the client's CPU per
// streamed token (prompt writing and sending included) and in cores, and
// the first-token stamp error. A pod is rated at the most streams where
// the stamp error's p99 is under 1 ms and the client uses under half of
// each core it has (docs/performance.md, "A load pod's rating").
//
// Each case runs two waves of its streams (about 15 s); -benchtime does not
// lengthen it.
func BenchmarkPodRating(b *testing.B) {
	base := startBenchServer(b) + fmt.Sprintf("/paced/prefill-%d", ratingPrefill.Milliseconds())
	for _, tokens := range []int{100_000, 500_000} {
		for _, streams := range []int{100, 300, 1000} {
			b.Run(fmt.Sprintf("prompt=%dK/streams=%d", tokens/1000, streams), func(b *testing.B) {
				benchRating(b, base, streams, tokens)
			})
		}
	}
}

// benchRating runs 2 x streams requests on streams goroutines whose starts
// are spread over one request's length, and measures the second wave: the
// requests started once every stream was running.
func benchRating(b *testing.B, base string, streams, tokens int) {
	c := NewClient(base, "bench")
	defer c.Close()
	c.http.Transport = stampTransport{c.http.Transport}
	builder := prompt.Builder{Seed: 1}
	length := ratingPrefill + pacedInterval*benchTokens
	total := 2 * streams
	texts := make([]*prompt.Text, total)
	ids := make([]int64, tokens/prompt.DefaultBlockSize)
	for j := range ids {
		ids[j] = int64(j)
	}
	var promptBytes int64
	for i := range texts {
		// every prompt is written in full as its body is read (no memo
		// of the blocks an earlier one wrote), the most a lane's could cost
		texts[i] = builder.Text("rating", uint64(i), ids, tokens)
		if i >= streams {
			promptBytes += int64(texts[i].Len())
		}
	}
	var errs stampErrors
	late := make([]time.Duration, 0, streams) // the read loop's first byte after the server's stamp
	var mu sync.Mutex
	var next, tokensIn, failed atomic.Int64
	// the steady window: from the claim of the first second-wave request
	// to the claim of the last
	var winStart, winEnd time.Time
	var cpuStart, cpuEnd time.Duration
	var rt0, rt1 runtimeSample
	runtime.GC()
	fetchServerDelays(rootURL(base)) // forget the last case's
	cpu0 := cpuTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range streams {
		wg.Go(func() {
			time.Sleep(length * time.Duration(g) / time.Duration(streams))
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				switch i {
				case streams:
					winStart, cpuStart, rt0 = time.Now(), cpuTime(), readRuntime()
				case total - 1:
					winEnd, cpuEnd, rt1 = time.Now(), cpuTime(), readRuntime()
				}
				var stamp int64
				var firstByte time.Time
				ctx := context.WithValue(context.Background(), stampKey{}, &stamp)
				ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotFirstResponseByte: func() { firstByte = time.Now() }})
				res := c.StreamPrompt(ctx, texts[i], benchTokens, time.Minute)
				if res.Error != "" {
					if failed.Add(1) <= 3 {
						b.Logf("request %d: %s: %s", i, res.Error, res.Detail)
					}
					continue
				}
				tokensIn.Add(int64(res.Chunks))
				if i >= streams {
					mu.Lock()
					errs.add(stamp, res.First.Sub(time.Unix(0, stamp)))
					late = append(late, firstByte.Sub(time.Unix(0, stamp)))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu := cpuTime() - cpu0
	// a pod past its rating fails requests (the server cannot take the
	// prompts as fast); that is reported, not fatal, up to half of them
	if f := failed.Load(); f > int64(total-streams)/2 || winEnd.IsZero() {
		b.Fatalf("%d of %d requests failed", f, total)
	}
	b.ReportMetric(float64(failed.Load()), "failed")
	win := winEnd.Sub(winStart).Seconds()
	b.ReportMetric(float64(promptBytes)/float64(total-streams)/1e6, "prompt-MB")
	b.ReportMetric(float64(promptBytes)*float64(total-streams-1)/float64(total-streams)/win/1e6, "prompt-MB/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(tokensIn.Load()), "cpu-µs/tok")
	b.ReportMetric((cpuEnd-cpuStart).Seconds()/win, "client-cores")
	_, late99, _ := stampQuantiles(late)
	b.ReportMetric(late99, "readloop-late-p99-µs")
	rt0.to(rt1).report(b, total-streams)
	errs.report(b, rootURL(base))
}
