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
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: rec.Handler()}
	go srv.Serve(ln)
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

// child runs this binary in a role and returns its first stdout line (its
// address), its stdin (close it to stop it) and the rest of its stdout.
func child(t *testing.T, role string, env ...string) (addr string, stop func() []byte) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
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
	return "http://" + strings.TrimSpace(line), stop
}

// TestAddedTTFT measures the time to first token of paced streams straight
// to the upstream and through the recording proxy, held open at the same
// time (HEADROOM_BENCH_RECORD_STREAMS of each, 100 by default), for
// HEADROOM_BENCH_RECORD_SECONDS (20). Each stream is an agent whose prompt
// grows by 300 words a turn from 4,000. It prints the quantiles of both and
// their difference; it runs only with HEADROOM_BENCH_RECORD=1.
func TestAddedTTFT(t *testing.T) {
	if os.Getenv(benchEnableEnv) != "1" {
		t.Skip("the added-latency benchmark runs with HEADROOM_BENCH_RECORD=1 (about 25 s)")
	}
	streams := envInt("HEADROOM_BENCH_RECORD_STREAMS", 100)
	seconds := envInt("HEADROOM_BENCH_RECORD_SECONDS", 20)
	up, stopUp := child(t, "upstream")
	proxy, stopProxy := child(t, "proxy", benchUpEnv+"="+up)
	defer stopUp()
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4096, DisableCompression: true}}
	warm := time.Now().Add(2 * time.Second)
	end := warm.Add(time.Duration(seconds) * time.Second)
	var mu sync.Mutex
	ttft := map[string][]time.Duration{}
	var wg sync.WaitGroup
	vocab := newVocabulary(3)
	base := vocab.words(4000)
	for i := range 2 * streams {
		path, target := "direct", up
		if i%2 == 1 {
			path, target = "proxy", proxy
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * benchInterval / time.Duration(2*streams)) // spread the starts over one token interval
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
	d, p := ttft["direct"], ttft["proxy"]
	t.Logf("%d streams each way for %d s (after 2 s warm-up): %d direct and %d proxied requests", streams, seconds, len(d), len(p))
	t.Logf("| path | p50 | p90 | p99 | max |")
	for _, row := range []struct {
		name string
		ds   []time.Duration
	}{{"direct", d}, {"proxy", p}} {
		t.Logf("| %s | %s | %s | %s | %s |", row.name, ms(q(row.ds, 0.5)), ms(q(row.ds, 0.9)), ms(q(row.ds, 0.99)), ms(q(row.ds, 1)))
	}
	t.Logf("| added | %s | %s | %s | |", ms(q(p, 0.5)-q(d, 0.5)), ms(q(p, 0.9)-q(d, 0.9)), ms(q(p, 0.99)-q(d, 0.99)))
	t.Logf("proxy: %.2f CPU s for %d requests (%.0f µs each, recording included); %s", res.CPU, res.Stats.Chats, 1e6*res.CPU/float64(max(res.Stats.Chats, 1)), res.Stats)
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
