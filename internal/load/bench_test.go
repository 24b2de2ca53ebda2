package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/trace"
)

// The client benchmark streams from a server in a child process (this test
// binary re-run with benchServerEnv set), so the client's CPU time, read with
// getrusage(RUSAGE_SELF), holds none of the server's.
const benchServerEnv = "HEADROOM_BENCH_SERVER"

// benchTokens is the tokens each benchmark stream carries.
const benchTokens = 200

// pacedInterval is the time between tokens of the paced server (/paced/...):
// 50 tokens a second per stream, a usual interactivity.
const pacedInterval = 20 * time.Millisecond

// firstChunkHeader carries the server's clock (Unix ns) just before it writes
// the headers and the first content chunk in one flush.
const firstChunkHeader = "X-First-Chunk-Unix-Ns"

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) == "1" {
		serveBench()
		return
	}
	os.Exit(m.Run())
}

// benchChunk is an OpenAI chunk of 150 bytes, as vLLM streams one token.
var benchChunk = []byte(`data: {"id":"chatcmpl-9f1c2a7b","object":"chat.completion.chunk","created":1732000000,"model":"bench","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}` + "\n\n")

// benchChunkSpaced is benchChunk as Python's json.dumps writes it (a space
// after every ":" and ","), as LiteLLM and other Python gateways do.
var benchChunkSpaced = []byte(`data: {"id": "chatcmpl-9f1c2a7b", "object": "chat.completion.chunk", "created": 1732000000, "model": "bench", "choices": [{"index": 0, "delta": {"content": " tok"}, "finish_reason": null}]}` + "\n\n")

// serveBench answers chat completions at zero latency until stdin closes.
func serveBench() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	usage := []byte(fmt.Sprintf(`data: {"id":"chatcmpl-9f1c2a7b","object":"chat.completion.chunk","created":1732000000,"model":"bench","choices":[],"usage":{"prompt_tokens":1000,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":512}}}`+"\n\ndata: [DONE]\n\n", 1000+benchTokens, benchTokens))
	usageSpaced := []byte(fmt.Sprintf(`data: {"id": "chatcmpl-9f1c2a7b", "object": "chat.completion.chunk", "created": 1732000000, "model": "bench", "choices": [], "usage": {"prompt_tokens": 1000, "total_tokens": %d, "completion_tokens": %d, "prompt_tokens_details": {"cached_tokens": 512}}}`+"\n\ndata: [DONE]\n\n", 1000+benchTokens, benchTokens))
	var delays serverDelays
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stats" {
			delays.ServeHTTP(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		paced := strings.HasPrefix(r.URL.Path, "/paced/")
		chunk, last := benchChunk, usage
		if strings.HasPrefix(r.URL.Path, "/spaced/") {
			chunk, last = benchChunkSpaced, usageSpaced
		}
		if i := strings.Index(r.URL.Path, "/prefill-"); i >= 0 {
			// /paced/prefill-<ms>/...: wait that long before the first token
			ms, _, _ := strings.Cut(r.URL.Path[i+len("/prefill-"):], "/")
			n, _ := strconv.Atoi(ms)
			time.Sleep(time.Duration(n) * time.Millisecond)
		}
		t0 := time.Now()
		h.Set(firstChunkHeader, strconv.FormatInt(t0.UnixNano(), 10))
		for i := range benchTokens {
			if paced && i > 0 {
				time.Sleep(pacedInterval)
			}
			w.Write(chunk)
			fl.Flush()
			if i == 0 {
				delays.add(t0.UnixNano(), time.Since(t0))
			}
		}
		w.Write(last)
	})}
	go srv.Serve(ln)
	io.Copy(io.Discard, os.Stdin) // the parent closing stdin ends the server
}

// startBenchServer runs the server process and returns its base URL.
func startBenchServer(b *testing.B) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if cpu := os.Getenv("HEADROOM_BENCH_SERVER_CPU"); cpu != "" {
		// pin the server to its own core (taskset) so the client's timestamps
		// measure the client, not a shared CPU queue
		cmd = exec.Command("taskset", "-c", cpu, os.Args[0], "-test.run=^$")
	}
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("bench server: %v", err)
	}
	return "http://" + addr[:len(addr)-1]
}

type stampKey struct{}

// stampTransport copies the server's first-chunk stamp into the *int64 the
// request's context carries.
type stampTransport struct{ base http.RoundTripper }

func (s stampTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if p, ok := r.Context().Value(stampKey{}).(*int64); ok && resp != nil {
		*p, _ = strconv.ParseInt(resp.Header.Get(firstChunkHeader), 10, 64)
	}
	return resp, err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStream measures the client's hot path: one op is one streamed
// request of 200 tokens; streams of them run at once. It reports streamed
// tokens per client CPU-second, heap allocations per token, and the error
// of the client's first-token stamp against the server's send time.
func BenchmarkStream(b *testing.B) {
	base := startBenchServer(b)
	for _, streams := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) { benchStreams(b, base, streams, 0) })
	}
}

// BenchmarkStreamJSON is BenchmarkStream on the same stream written two
// ways, side by side: compact JSON (the fast path: our simulator, vLLM,
// SGLang, TGI, llama.cpp, Ollama, OpenAI) and JSON with a space after every
// ":" and "," (Python's json.dumps, as LiteLLM and other Python gateways
// write it), which every chunk takes through encoding/json.
func BenchmarkStreamJSON(b *testing.B) {
	base := startBenchServer(b)
	for _, streams := range []int{100, 1000} {
		for _, layout := range []string{"compact", "spaced"} {
			url := base
			if layout == "spaced" {
				url += "/spaced"
			}
			b.Run(fmt.Sprintf("json=%s/streams=%d", layout, streams), func(b *testing.B) { benchStreams(b, url, streams, 0) })
		}
	}
}

// BenchmarkStreamSteady holds `streams` paced streams open in a steady state:
// starts are spread over one stream's length (200 tokens x 20 ms), as
// closed-loop lanes spread their turns, instead of all starting within one
// token interval. It measures the TTFT stamp at that concurrency without the
// start-up burst of BenchmarkStreamPaced.
func BenchmarkStreamSteady(b *testing.B) {
	base := startBenchServer(b) + "/paced"
	for _, streams := range []int{100, 1000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			benchStreams(b, base, streams, pacedInterval*benchTokens)
		})
	}
}

// BenchmarkStreamPaced is BenchmarkStream against a server that sends a
// token every 20 ms, streams starting spread over one interval: the client
// is not saturated, so the first-token error is the client's own.
func BenchmarkStreamPaced(b *testing.B) {
	base := startBenchServer(b) + "/paced"
	for _, streams := range []int{100, 1000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) { benchStreams(b, base, streams, pacedInterval) })
	}
}

func benchStreams(b *testing.B, base string, streams int, spread time.Duration) {
	benchStreamsStamped(b, base, streams, spread, stampKernel)
}

// How a benchmark's client stamps tokens, for side-by-side runs.
const (
	stampKernel = "kernel" // the client as it is: the kernel's receive time
	stampRead   = "read"   // the connection's read's return
	stampParse  = "parse"  // the token's parse, as before stampConn
)

// benchStreamsStamped is benchStreams with tokens stamped as stamp says.
func benchStreamsStamped(b *testing.B, base string, streams int, spread time.Duration, stamp string) {
	c := NewClient(base, "bench")
	defer c.Close()
	switch plain := (&net.Dialer{}).DialContext; stamp {
	case stampParse:
		c.http.Transport.(*http.Transport).DialContext = plain
	case stampRead:
		c.http.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := plain(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &stampConn{Conn: conn}, nil
		}
	}
	c.http.Transport = stampTransport{c.http.Transport}
	promptText := []byte("a short placeholder prompt for the benchmark")
	total := max(b.N, streams)
	// errs is the stamp error; wake is its part before the transport's
	// read loop saw the answer's first byte (the server, the kernel, the
	// read loop's wake-up), hand the part after (the read loop handing the
	// response to the request's goroutine, that goroutine's wake-up, its
	// read and parse).
	errs := make([]time.Duration, total)
	stamps := make([]int64, total)
	wake := make([]time.Duration, total)
	hand := make([]time.Duration, total)
	var next, tokens, failed atomic.Int64
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	fetchServerDelays(rootURL(base)) // forget the warm-up's
	runtime.ReadMemStats(&ms0)
	rt0 := readRuntime()
	cpu0 := cpuTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range streams {
		wg.Go(func() {
			time.Sleep(spread * time.Duration(g) / time.Duration(streams))
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				var stamp int64
				var firstByte time.Time
				ctx := context.WithValue(context.Background(), stampKey{}, &stamp)
				ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotFirstResponseByte: func() { firstByte = time.Now() }})
				res := c.Stream(ctx, promptText, benchTokens, time.Minute)
				if res.Error != "" {
					failed.Add(1)
					continue
				}
				tokens.Add(int64(res.Chunks))
				sent := time.Unix(0, stamp)
				stamps[i], errs[i], wake[i], hand[i] = stamp, res.First.Sub(sent), firstByte.Sub(sent), res.First.Sub(firstByte)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu := cpuTime() - cpu0
	rt := rt0.to(readRuntime())
	runtime.ReadMemStats(&ms1)
	if failed.Load() > 0 {
		b.Fatalf("%d of %d streams failed", failed.Load(), total)
	}
	n := float64(tokens.Load())
	_, wake99, _ := stampQuantiles(wake)
	_, hand99, _ := stampQuantiles(hand)
	b.ReportMetric(n/cpu.Seconds(), "tok/cpu-s")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/n, "allocs/tok")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/n, "B/tok")
	b.ReportMetric(wake99, "to-readloop-p99-µs")
	b.ReportMetric(hand99, "readloop-to-stamp-p99-µs")
	rt.report(b, total)
	(&stampErrors{stamps, errs}).report(b, rootURL(base))
}

// rootURL is base (http://host:port/...) cut to http://host:port.
func rootURL(base string) string {
	if i := strings.IndexByte(base[len("http://"):], '/'); i >= 0 {
		return base[:len("http://")+i]
	}
	return base
}

// BenchmarkCorpus reads the shared corpus of 474 real traces and builds the
// prompt of every one of their model calls, reporting the time of each part
// and the process's peak resident memory.
func BenchmarkCorpus(b *testing.B) {
	path := filepath.Join("..", "..", "..", "shared", "traces", "weka-claude-code.jsonl.gz")
	if _, err := os.Stat(path); err != nil {
		b.Skipf("shared corpus absent: %v", err)
	}
	for range b.N {
		t0 := time.Now()
		traces, err := trace.ReadPath(path)
		if err != nil {
			b.Fatal(err)
		}
		read := time.Since(t0)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t1 := time.Now()
		var buf []byte
		var words, bytes int64
		builder := prompt.Builder{Seed: 1}
		for _, tr := range traces {
			for _, t := range tr.Turns() {
				builder.BlockSize = t.BlockSize
				buf = builder.Append(buf[:0], tr.ID, 0, t.HashIDs, t.In)
				words += int64(t.In)
				bytes += int64(len(buf))
			}
		}
		build := time.Since(t1)
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		b.ReportMetric(read.Seconds(), "read-s")
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-heap-MiB")
		b.ReportMetric(build.Seconds(), "build-s")
		b.ReportMetric(float64(words)/build.Seconds()/1e6, "Mtok-built/s")
		b.ReportMetric(float64(bytes)/(1<<30), "GiB-built")
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-rss-MiB")
	}
}

// BenchmarkStreamJSONBaseline is the plain Go client the issue compares
// against: net/http, bufio.Scanner and encoding/json on every chunk. It
// reports only streamed tokens per client CPU-second.
func BenchmarkStreamJSONBaseline(b *testing.B) {
	base := startBenchServer(b)
	for _, streams := range []int{100, 1000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096, MaxIdleConns: 4096}}
			body := `{"model":"bench","messages":[{"role":"user","content":"p"}],"max_tokens":200,"stream":true,"stream_options":{"include_usage":true}}`
			total := max(b.N, streams)
			var next, tokens, failed atomic.Int64
			cpu0 := cpuTime()
			var wg sync.WaitGroup
			for range streams {
				wg.Go(func() {
					for next.Add(1) <= int64(total) {
						resp, err := hc.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
						if err != nil {
							failed.Add(1)
							continue
						}
						sc := bufio.NewScanner(resp.Body)
						for sc.Scan() {
							line, ok := strings.CutPrefix(sc.Text(), "data: ")
							if !ok || line == "[DONE]" {
								continue
							}
							var chunk struct {
								Choices []struct {
									Delta struct {
										Content string `json:"content"`
									} `json:"delta"`
								} `json:"choices"`
								Usage *struct {
									PromptTokens int `json:"prompt_tokens"`
								} `json:"usage"`
							}
							if json.Unmarshal([]byte(line), &chunk) == nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
								_ = time.Now()
								tokens.Add(1)
							}
						}
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			if failed.Load() > 0 {
				b.Fatalf("%d streams failed", failed.Load())
			}
			b.ReportMetric(float64(tokens.Load())/(cpuTime()-cpu0).Seconds(), "tok/cpu-s")
		})
	}
}

// benchPayloads are the data payloads of benchChunk and of its spaced
// (json.dumps) twin.
func benchPayloads() (compact, spaced []byte) {
	compact = trimSpace(bytes.TrimSuffix(bytes.TrimPrefix(benchChunk, []byte("data: ")), []byte("\n\n")))
	spaced = trimSpace(bytes.TrimSuffix(bytes.TrimPrefix(benchChunkSpaced, []byte("data: ")), []byte("\n\n")))
	return compact, spaced
}

// BenchmarkClassify measures one token chunk's classification alone: the
// fast path on compact JSON, the full decode on compact and spaced JSON.
func BenchmarkClassify(b *testing.B) {
	compact, spaced := benchPayloads()
	for _, memo := range []bool{true, false} {
		b.Run(fmt.Sprintf("fast/compact/memo=%v", memo), func(b *testing.B) {
			b.ReportAllocs()
			var m *fastMemo
			if memo {
				m = new(fastMemo) // as in a stream: the chunks' head is remembered
			}
			for b.Loop() {
				if c, ok := classifyFast(compact, m); !ok || !c.answer {
					b.Fatal("fast path not sure of the benchmark chunk")
				}
			}
		})
	}
	for _, in := range []struct {
		name string
		p    []byte
	}{{"full/compact", compact}, {"full/spaced", spaced}} {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c, err := classifyFull(in.p); err != nil || !c.answer {
					b.Fatal(err)
				}
			}
		})
	}
}
