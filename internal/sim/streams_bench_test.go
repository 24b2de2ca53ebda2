package sim

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// streamsServerEnv makes the test binary a simulator server process (see
// serveStreamsBench) instead of running tests.
const streamsServerEnv = "HEADROOM_SIM_STREAMS_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(streamsServerEnv) == "1" {
		if err := serveStreamsBench(); err != nil {
			fmt.Fprintln(os.Stderr, "sim streams server:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// streamsProfile is an engine with room for 8192 short streams at once: no
// queueing, no preemption, a 20 ms step plus 10 ns per token of context, so
// the figures measure the simulator's per-token path, not its scheduling.
func streamsProfile() Profile {
	return Profile{
		Name: "streams", Model: "bench", MaxModelLen: 4096, BlockSize: 16,
		KVCapacityTokens: 4_000_000, MaxNumSeqs: 8192, MaxBatchedTokens: 16384,
		PrefillTokensPerSecond: 100_000, DecodeBaseSeconds: 0.020, DecodeSecondsPerKVToken: 1e-8,
	}
}

// streamsScale is the time scale of BenchmarkConcurrentStreams
// (HEADROOM_SIM_BENCH_SCALE, default 1).
func streamsScale() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("HEADROOM_SIM_BENCH_SCALE"), 64); err == nil && v > 0 {
		return v
	}
	return 1
}

// serveStreamsBench serves a simulator with streamsProfile on loopback,
// prints its address, and serves its own CPU time (getrusage, ns) on
// /bench/cpu until stdin closes.
func serveStreamsBench() error {
	s, err := New(Options{Profile: streamsProfile(), Scale: streamsScale(), Seed: 1})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bench/cpu", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, cpuTime().Nanoseconds())
	})
	mux.Handle("/", s.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx) }()
	go func() { _ = (&http.Server{Handler: mux}).Serve(ln) }()
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// BenchmarkConcurrentStreams opens N streaming chat requests at once against
// a simulator in its own process (so getrusage there counts the server
// alone), each with a 32-word prompt and a 300-token answer, at the time
// scale HEADROOM_SIM_BENCH_SCALE (default 1: a 20-25 ms modelled step is
// 20-25 ms of wall time). One op is one round of N streams. It reports
// streams completed and failed, the most streams open at once, the server's
// CPU per streamed token and its cores used, tokens per wall second, and the
// engine's worst lag behind wall time (headroom_sim_lag_max_seconds, in
// modelled seconds: near zero while the server keeps pace).
// HEADROOM_SIM_BENCH_STREAMS="4000,8000" replaces the stream counts.
//
//	GOMAXPROCS=2 go test ./internal/sim -run '^$' -bench ConcurrentStreams -benchtime 1x
func BenchmarkConcurrentStreams(b *testing.B) {
	counts := []int{250, 500, 1000, 2000}
	if v := os.Getenv("HEADROOM_SIM_BENCH_STREAMS"); v != "" {
		counts = counts[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("HEADROOM_SIM_BENCH_STREAMS=%q: give stream counts such as 4000,8000", v)
			}
			counts = append(counts, n)
		}
	}
	for _, n := range counts {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) { concurrentStreams(b, n, 300) })
	}
}

func startStreamsServer(b *testing.B) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), streamsServerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("sim streams server: %v", err)
	}
	return "http://" + addr[:len(addr)-1]
}

func serverCPU(b *testing.B, client *http.Client, url string) time.Duration {
	resp, err := client.Get(url + "/bench/cpu")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	ns, err := strconv.ParseInt(string(body), 10, 64)
	if err != nil {
		b.Fatalf("server cpu %q: %v", body, err)
	}
	return time.Duration(ns)
}

func concurrentStreams(b *testing.B, n, answer int) {
	url := startStreamsServer(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}}
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = chatJSON("bench", words(fmt.Sprintf("s%d-", i), 0, 32), answer, true)
	}
	var ok, failed, tokens, open, peak atomic.Int64
	b.ResetTimer()
	wall, cpu0, own0 := time.Now(), serverCPU(b, client, url), cpuTime()
	for range b.N {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				resp, err := client.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(bodies[i]))
				if err != nil {
					failed.Add(1)
					return
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					return
				}
				cur := open.Add(1)
				for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
				}
				defer open.Add(-1)
				rd := bufio.NewReaderSize(resp.Body, 16<<10)
				got, done := 0, false
				for {
					line, err := rd.ReadSlice('\n')
					if bytes.Contains(line, []byte(`"content":"`)) && !bytes.Contains(line, []byte(`"role"`)) {
						got++
					}
					if bytes.HasPrefix(line, []byte("data: [DONE]")) {
						done = true
					}
					if err != nil && err != bufio.ErrBufferFull {
						break
					}
				}
				tokens.Add(int64(got))
				if done && got == answer {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
	}
	elapsed, used, own := time.Since(wall), serverCPU(b, client, url)-cpu0, cpuTime()-own0
	b.StopTimer()
	fams := scrape(b, url)
	b.ReportMetric(float64(ok.Load())/float64(b.N), "streams-ok")
	b.ReportMetric(float64(failed.Load())/float64(b.N), "streams-failed")
	b.ReportMetric(float64(peak.Load()), "peak-open")
	b.ReportMetric(float64(used.Nanoseconds())/float64(max(tokens.Load(), 1)), "server-cpu-ns/tok")
	b.ReportMetric(used.Seconds()/elapsed.Seconds(), "server-cores")
	b.ReportMetric(own.Seconds()/elapsed.Seconds(), "client-cores")
	b.ReportMetric(float64(tokens.Load())/elapsed.Seconds(), "tok/s")
	b.ReportMetric(value(b, fams, "headroom_sim_lag_max_seconds"), "lag-max-s")
	b.ReportMetric(value(b, fams, "vllm:num_preemptions_total"), "preemptions")
}
