package load

import (
	"encoding/json"
	"math"
	"net/http"
	"runtime/metrics"
	"slices"
	"sync"
	"testing"
	"time"
)

// runtimeSample reads the runtime/metrics a stream benchmark reports beside
// its stamp error, so a slow stamp can be told apart by cause: goroutines
// waiting to run (scheduler latency), garbage collection (cycles, their
// stop-the-world pauses, and the CPU the collector took, assists included).
type runtimeSample []metrics.Sample

var runtimeMetrics = []string{
	"/sched/latencies:seconds",
	"/sched/pauses/total/gc:seconds",
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/gc/mark/assist:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
}

func readRuntime() runtimeSample {
	s := make(runtimeSample, len(runtimeMetrics))
	for i, name := range runtimeMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	return s
}

// runtimeDelta is what the runtime did between two samples.
type runtimeDelta struct {
	schedP50, schedP99, schedMax time.Duration // a runnable goroutine's wait for a thread
	gcPauseP99, gcPauseTotal     time.Duration // stop-the-world pauses for the collector
	gcCycles                     uint64
	gcCPU, assistCPU, totalCPU   float64 // seconds; totalCPU is the runtime's estimate of all CPU available
}

func (a runtimeSample) to(b runtimeSample) runtimeDelta {
	var d runtimeDelta
	sched := histDelta(a[0].Value.Float64Histogram(), b[0].Value.Float64Histogram())
	d.schedP50, d.schedP99, d.schedMax = sched.quantile(0.5), sched.quantile(0.99), sched.quantile(1)
	pauses := histDelta(a[1].Value.Float64Histogram(), b[1].Value.Float64Histogram())
	d.gcPauseP99, d.gcPauseTotal = pauses.quantile(0.99), pauses.sum()
	d.gcCycles = b[2].Value.Uint64() - a[2].Value.Uint64()
	d.gcCPU = b[3].Value.Float64() - a[3].Value.Float64()
	d.assistCPU = b[4].Value.Float64() - a[4].Value.Float64()
	d.totalCPU = b[5].Value.Float64() - a[5].Value.Float64()
	return d
}

// hist is the counts a runtime histogram gained between two reads.
type hist struct {
	counts  []uint64
	buckets []float64 // len(counts)+1 boundaries
}

func histDelta(a, b *metrics.Float64Histogram) hist {
	h := hist{counts: make([]uint64, len(b.Counts)), buckets: b.Buckets}
	for i := range b.Counts {
		h.counts[i] = b.Counts[i] - a.Counts[i]
	}
	return h
}

// quantile is the upper bound of the bucket that holds the q-th sample
// (its lower bound for the last, unbounded one); 0 when there is none.
func (h hist) quantile(q float64) time.Duration {
	var n uint64
	for _, c := range h.counts {
		n += c
	}
	if n == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(n)))
	want = max(want, 1)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= want {
			v := h.buckets[i+1]
			if math.IsInf(v, 1) {
				v = h.buckets[i]
			}
			return time.Duration(v * 1e9)
		}
	}
	return 0
}

// sum estimates the samples' total from their buckets' midpoints.
func (h hist) sum() time.Duration {
	var s float64
	for i, c := range h.counts {
		lo, hi := h.buckets[i], h.buckets[i+1]
		if math.IsInf(lo, -1) {
			lo = hi
		}
		if math.IsInf(hi, 1) {
			hi = lo
		}
		s += float64(c) * (lo + hi) / 2
	}
	return time.Duration(s * 1e9)
}

// report adds the runtime's figures to a benchmark's, per 1,000 requests
// where they are counts.
func (d runtimeDelta) report(b *testing.B, requests int) {
	b.ReportMetric(float64(d.schedP50.Microseconds()), "sched-p50-µs")
	b.ReportMetric(float64(d.schedP99.Microseconds()), "sched-p99-µs")
	b.ReportMetric(float64(d.gcCycles)*1000/float64(requests), "gc/1k-req")
	b.ReportMetric(float64(d.gcPauseP99.Microseconds()), "gc-pause-p99-µs")
	if d.totalCPU > 0 {
		b.ReportMetric(100*d.gcCPU/d.totalCPU, "gc-cpu-%")
	}
}

// serverDelays collects, in the benchmark server, the time from each
// answer's first-chunk stamp to its flush's return: the part of the stamp
// error that is the server's own (and its write system call's). They are
// keyed by the stamp, which the client has too, so a request's error can
// be netted of its server's delay.
type serverDelays struct {
	mu sync.Mutex
	d  map[int64]time.Duration
}

func (s *serverDelays) add(stamp int64, d time.Duration) {
	s.mu.Lock()
	if s.d == nil {
		s.d = map[int64]time.Duration{}
	}
	s.d[stamp] = max(s.d[stamp], d)
	s.mu.Unlock()
}

// ServeHTTP answers GET /stats with the delays by stamp and forgets them.
func (s *serverDelays) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	d := s.d
	s.d = nil
	s.mu.Unlock()
	json.NewEncoder(w).Encode(d)
}

// fetchServerDelays reads and resets the server's delays (base is the
// server's root URL).
func fetchServerDelays(base string) (map[int64]time.Duration, error) {
	resp, err := http.Get(base + "/stats")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var d map[int64]time.Duration
	return d, json.NewDecoder(resp.Body).Decode(&d)
}

// stampErrors is the client's stamp errors (stamp is each request's
// server stamp, Unix ns, errs its error) as the benchmarks report them:
// whole, and net of the server's own delay between its stamp and its
// flush, which bounds the client's share from below.
type stampErrors struct {
	stamps []int64
	errs   []time.Duration
}

func (e *stampErrors) add(stamp int64, err time.Duration) {
	e.stamps = append(e.stamps, stamp)
	e.errs = append(e.errs, err)
}

// report reports the errors' quantiles, the server's delays' and the
// netted errors'.
func (e *stampErrors) report(b *testing.B, base string) {
	p50, p99, mx := stampQuantiles(slices.Clone(e.errs))
	b.ReportMetric(p50, "ttft-err-p50-µs")
	b.ReportMetric(p99, "ttft-err-p99-µs")
	b.ReportMetric(mx, "ttft-err-max-µs")
	delays, err := fetchServerDelays(base)
	if err != nil {
		b.Logf("server delays: %v", err)
		return
	}
	srv := make([]time.Duration, 0, len(e.errs))
	net := make([]time.Duration, 0, len(e.errs))
	for i, s := range e.stamps {
		if d, ok := delays[s]; ok {
			srv = append(srv, d)
			net = append(net, e.errs[i]-d)
		}
	}
	if len(net) == 0 {
		return
	}
	_, s99, _ := stampQuantiles(srv)
	_, n99, _ := stampQuantiles(net)
	b.ReportMetric(s99, "srv-p99-µs")
	b.ReportMetric(n99, "ttft-err-net-p99-µs")
}

// stampQuantiles sorts errs and returns its p50 and p99 and max in µs.
func stampQuantiles(errs []time.Duration) (p50, p99, mx float64) {
	slices.Sort(errs)
	q := func(p float64) float64 { return float64(errs[int(p*float64(len(errs)-1))].Microseconds()) }
	return q(0.5), q(0.99), q(1)
}
