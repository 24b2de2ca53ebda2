package record

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The added-latency benchmark runs three processes: a paced SSE upstream
// and the recording proxy, each this test binary re-run with benchRoleEnv
// set, and the client (the test itself), which holds streams open directly
// to the upstream and through the proxy at the same time, so both see the
// same machine. See docs/performance.md, "Recording proxy".
const (
	benchRoleEnv   = "HEADROOM_RECORD_BENCH_ROLE"
	benchUpEnv     = "HEADROOM_RECORD_BENCH_UPSTREAM"
	benchEnableEnv = "HEADROOM_BENCH_RECORD"
	// benchProxyCPUsEnv pins the proxy process to these cores (taskset -c)
	benchProxyCPUsEnv = "HEADROOM_BENCH_RECORD_PROXY_CPUS"
)

// Paced upstream: the first token as soon as the request is read, then one
// every benchInterval, benchTokens in all.
const (
	benchTokens   = 50
	benchInterval = 20 * time.Millisecond
)

func TestMain(m *testing.M) {
	switch os.Getenv(benchRoleEnv) {
	case "upstream":
		serveUpstream()
		return
	case "proxy":
		serveProxy()
		return
	}
	os.Exit(m.Run())
}

var benchChunk = []byte(`data: {"id":"chatcmpl-9f1c2a7b","object":"chat.completion.chunk","created":1732000000,"model":"bench","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}` + "\n\n")

// serveUpstream answers chat completions at a paced 50 tokens a second until
// stdin closes; /tokenize is not served (the recorder hashes text blocks).
func serveUpstream() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// not parsed: the upstream must cost the machine little, so what
		// the benchmark sees is the proxy
		n, _ := io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r)
			return
		}
		words := n / 8
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := range benchTokens {
			if i > 0 {
				time.Sleep(benchInterval)
			}
			w.Write(benchChunk)
			fl.Flush()
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", words, benchTokens)
	})}
	go srv.Serve(ln)
	io.Copy(io.Discard, os.Stdin)
}

// serveProxy runs the recorder in front of the upstream until stdin closes,
// then writes its stats as JSON on stdout.
func serveProxy() {
	u, _ := url.Parse(os.Getenv(benchUpEnv))
	dir, _ := os.MkdirTemp("", "record-bench")
	defer os.RemoveAll(dir)
	f, err := CreateFile(filepath.Join(dir, "rec.jsonl.gz"), false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rec, err := New(Options{Upstream: u, Out: f, Gzip: true, Log: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if path := os.Getenv("HEADROOM_RECORD_BENCH_PROFILE"); path != "" {
		// a CPU profile of the proxy process, for go tool pprof
		if pf, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(pf)
			defer func() { pprof.StopCPUProfile(); pf.Close() }()
		}
	}
	bare, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String(), bare.Addr().String())
	srv := &http.Server{Handler: rec.Handler()}
	go srv.Serve(ln)
	go (&http.Server{Handler: bareProxy(u)}).Serve(bare)
	io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	rec.Close(ctx)
	f.Close()
	var ru struct{ user, sys float64 }
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		ut, _ := strconv.ParseFloat(fields[11], 64)
		st, _ := strconv.ParseFloat(fields[12], 64)
		ru.user, ru.sys = ut/100, st/100 // clock ticks, USER_HZ 100
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"stats": rec.Stats(), "cpu_s": ru.user + ru.sys})
}

// bareProxy is the least a streaming proxy does, written by hand, to
// compare httputil.ReverseProxy with: send the request on with its headers,
// copy the answer's status and headers, then each read of the answer as one
// write and flush. It records nothing.
func bareProxy(up *url.URL) http.Handler {
	tr := DefaultTransport()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, _ := http.NewRequestWithContext(r.Context(), r.Method, up.JoinPath(r.URL.Path).String(), r.Body)
		out.ContentLength = r.ContentLength
		for k, v := range r.Header {
			out.Header[k] = v
		}
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		fl := w.(http.Flusher)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				w.Write(buf[:n])
				fl.Flush()
			}
			if err != nil {
				return
			}
		}
	})
}

// child runs this binary in a role and returns its first stdout line (its
// address), its stdin (close it to stop it) and the rest of its stdout.
func child(t *testing.T, role string, env ...string) (addr string, stop func() []byte) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if cpus := os.Getenv(benchProxyCPUsEnv); role == "proxy" && cpus != "" {
		// the proxy on cores of its own (run the test itself under
		// `taskset -c` on the others): what a hop adds when it does not
		// wait for a core the client or upstream holds
		cmd = exec.Command("taskset", "-c", cpus, os.Args[0], "-test.run=^$")
	}
	cmd.Env = append(append(os.Environ(), benchRoleEnv+"="+role), env...)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(out)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v", role, err)
	}
	var once sync.Once
	var rest []byte
	stop = func() []byte {
		once.Do(func() {
			stdin.Close()
			rest, _ = io.ReadAll(br)
			cmd.Wait()
		})
		return rest
	}
	t.Cleanup(func() { stop() })
	return strings.TrimSpace(line), stop
}

// TestAddedTTFT measures the time to first token of paced streams on three
// paths held open at the same time: straight to the upstream, through the
// recording proxy, and through a bare hand-written proxy (bareProxy),
// HEADROOM_BENCH_RECORD_STREAMS of each (100 by default), for
// HEADROOM_BENCH_RECORD_SECONDS (20); HEADROOM_BENCH_RECORD_BARE=0 leaves
// the bare path out. Each stream is an agent whose prompt
// grows by 300 words a turn from 4,000. It prints each path's quantiles and
// what each adds to the direct path's; it runs only with
// HEADROOM_BENCH_RECORD=1.
func TestAddedTTFT(t *testing.T) {
	if os.Getenv(benchEnableEnv) != "1" {
		t.Skip("the added-latency benchmark runs with HEADROOM_BENCH_RECORD=1 (about 25 s)")
	}
	streams := envInt("HEADROOM_BENCH_RECORD_STREAMS", 100)
	seconds := envInt("HEADROOM_BENCH_RECORD_SECONDS", 20)
	up, stopUp := child(t, "upstream")
	up = "http://" + up
	addrs, stopProxy := child(t, "proxy", benchUpEnv+"="+up)
	recAddr, bareAddr, _ := strings.Cut(addrs, " ")
	targets := []struct{ name, url string }{{"direct", up}, {"record", "http://" + recAddr}, {"bare", "http://" + bareAddr}}
	if os.Getenv("HEADROOM_BENCH_RECORD_BARE") == "0" {
		targets = targets[:2] // direct and record only: less load on a small machine
	}
	defer stopUp()
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4096, DisableCompression: true}}
	warm := time.Now().Add(2 * time.Second)
	end := warm.Add(time.Duration(seconds) * time.Second)
	var mu sync.Mutex
	ttft := map[string][]time.Duration{}
	var wg sync.WaitGroup
	vocab := newVocabulary(3)
	base := vocab.words(4000)
	for i := range len(targets) * streams {
		path, target := targets[i%len(targets)].name, targets[i%len(targets)].url
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * benchInterval / time.Duration(len(targets)*streams)) // spread the starts over one token interval
			// the body is built by appending each turn's messages, encoded
			// once, so the client costs the machine little
			history := fmt.Appendf(nil, `{"model":"bench","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":%q},{"role":"user","content":"agent %d"}`, base, i)
			for time.Now().Before(end) {
				d, err := firstToken(client, target, append(history, "]}"...))
				if err != nil {
					t.Errorf("%s: %v", path, err)
					return
				}
				if time.Now().After(warm) {
					mu.Lock()
					ttft[path] = append(ttft[path], d)
					mu.Unlock()
				}
				history = fmt.Appendf(history, `,{"role":"assistant","content":%q},{"role":"user","content":%q}`, strings.Repeat("tok ", benchTokens), vocab.words(300))
			}
		}()
	}
	wg.Wait()
	var res struct {
		Stats Stats   `json:"stats"`
		CPU   float64 `json:"cpu_s"`
	}
	if err := json.Unmarshal(stopProxy(), &res); err != nil {
		t.Fatalf("proxy stats: %v", err)
	}
	q := func(ds []time.Duration, p float64) time.Duration {
		slices.Sort(ds)
		return ds[min(len(ds)-1, int(p*float64(len(ds))))]
	}
	d := ttft["direct"]
	t.Logf("%d streams on each path for %d s (after 2 s warm-up): %d direct, %d through record, %d through the bare proxy", streams, seconds, len(d), len(ttft["record"]), len(ttft["bare"]))
	t.Logf("| path | p50 | p90 | p99 | max | p50 added | p90 added | p99 added |")
	for _, tg := range targets {
		ds := ttft[tg.name]
		t.Logf("| %s | %s | %s | %s | %s | %s | %s | %s |", tg.name, ms(q(ds, 0.5)), ms(q(ds, 0.9)), ms(q(ds, 0.99)), ms(q(ds, 1)),
			ms(q(ds, 0.5)-q(d, 0.5)), ms(q(ds, 0.9)-q(d, 0.9)), ms(q(ds, 0.99)-q(d, 0.99)))
	}
	t.Logf("proxy process (record and bare): %.2f CPU s for %d recorded requests (%.0f µs each, recording included); %s", res.CPU, res.Stats.Chats, 1e6*res.CPU/float64(max(res.Stats.Chats, 1)), res.Stats)
}

// firstToken sends one streamed chat request and returns the time from just
// before the send to the first content chunk, then reads the stream out.
func firstToken(c *http.Client, base string, data []byte) (time.Duration, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-bench")
	began := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 32<<10)
	var first time.Duration
	for {
		line, err := br.ReadSlice('\n')
		if first == 0 && bytes.Contains(line, []byte(`"content"`)) {
			first = time.Since(began)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if first == 0 {
		return 0, fmt.Errorf("HTTP %d: no content chunk", resp.StatusCode)
	}
	return first, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
