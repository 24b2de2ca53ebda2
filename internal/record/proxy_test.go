package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/trace"
)

// fakeUpstream answers chat completions with a short stream whose usage
// counts the prompt's words, and (with tokens) serves /tokenize with one id
// per word. It keeps the last request's body and Authorization header.
type fakeUpstream struct {
	tokens   bool
	mu       sync.Mutex
	lastBody []byte
	lastAuth string
}

func (f *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if strings.HasSuffix(r.URL.Path, "/chat/completions") {
		f.mu.Lock()
		f.lastBody, f.lastAuth = body, r.Header.Get("Authorization")
		f.mu.Unlock()
	}
	var req struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &req)
	var words []string
	for _, m := range req.Messages {
		words = append(words, strings.Fields(m.Content)...)
	}
	switch {
	case r.URL.Path == "/tokenize" && f.tokens:
		ids := make([]uint32, len(words))
		for i, w := range words {
			h := fnv.New32a()
			h.Write([]byte(w))
			ids[i] = h.Sum32()
		}
		// vLLM's TokenizeResponse: count, max_model_len, tokens
		json.NewEncoder(w).Encode(map[string]any{"count": len(ids), "max_model_len": 131072, "tokens": ids})
	case strings.HasSuffix(r.URL.Path, "/chat/completions") && req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Upstream", "yes")
		for i := range 5 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d \"},\"finish_reason\":null}]}\n\n", i)
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":5}}\n\n", len(words))
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"a b c"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":3}}`, len(words))
	default:
		http.NotFound(w, r)
	}
}

// chat sends one chat request through the proxy and returns the answer.
func chat(t testing.TB, base string, ms []map[string]any, stream, usage bool) []byte {
	t.Helper()
	body := map[string]any{"model": "m", "messages": ms, "stream": stream}
	if usage {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer sk-pass-through")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HTTP %d, %v: %s", resp.StatusCode, err, out)
	}
	return out
}

// TestProxyPassesEverythingThrough: the request reaches the upstream as the
// agent sent it, key included, the answer comes back byte for byte with its
// headers, and other endpoints pass through too.
func TestProxyPassesEverythingThrough(t *testing.T) {
	up := &fakeUpstream{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	p := startRecorder(t, srv.URL, Options{})
	ms := msgs("system:be brief", "user:hello there")
	direct := chat(t, srv.URL, ms, true, true)
	up.mu.Lock()
	sent := append([]byte(nil), up.lastBody...)
	up.mu.Unlock()
	via := chat(t, p.url, ms, true, true)
	if !bytes.Equal(via, direct) {
		t.Errorf("the answer through the proxy differs:\n%s\ndirect:\n%s", via, direct)
	}
	up.mu.Lock()
	if !bytes.Equal(up.lastBody, sent) || up.lastAuth != "Bearer sk-pass-through" {
		t.Errorf("the upstream got %s with Authorization %q", up.lastBody, up.lastAuth)
	}
	up.mu.Unlock()
	if got := chat(t, p.url, ms, false, false); !bytes.Contains(got, []byte(`"content":"a b c"`)) {
		t.Errorf("non-streamed answer: %s", got)
	}
	data, _ := json.Marshal(map[string]any{"model": "m", "messages": ms, "stream": true})
	hresp, err := http.Post(p.url+"/v1/chat/completions", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, hresp.Body)
	hresp.Body.Close()
	if hresp.Header.Get("X-Upstream") != "yes" || hresp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("the answer's headers through the proxy: %v", hresp.Header)
	}
	resp, err := http.Get(p.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/models through the proxy: %d, the upstream says 404", resp.StatusCode)
	}
	p.stop(t)
	st := p.rec.Stats()
	if st.Proxied != 4 || st.Chats != 3 || st.Recorded != 3 {
		t.Errorf("stats: %+v", st)
	}
}

// TestProxyStreamsEachChunkAsItComes: the upstream sends a chunk only once
// the agent has read the one before, so a proxy that held any chunk back
// would stall the stream; every byte arrives unchanged and in order.
func TestProxyStreamsEachChunkAsItComes(t *testing.T) {
	const chunks = 100
	got := make(chan int, 1)
	var sentAll bytes.Buffer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r) // the recorder's /tokenize
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := range chunks {
			c := fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%03d\"}}]}\n\n", i)
			sentAll.WriteString(c)
			io.WriteString(w, c)
			fl.Flush()
			select {
			case n := <-got:
				if n != i {
					t.Errorf("the agent read chunk %d after chunk %d was sent", n, i)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("chunk %d was not passed on within 5 s", i)
				return
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
		sentAll.WriteString("data: [DONE]\n\n")
	}))
	defer srv.Close()
	p := startRecorder(t, srv.URL, Options{})
	data, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs("user:go"), "stream": true})
	resp, err := http.Post(p.url+"/v1/chat/completions", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var all bytes.Buffer
	for i := 0; ; {
		line, err := br.ReadBytes('\n')
		all.Write(line)
		if err != nil {
			break
		}
		if bytes.HasPrefix(line, []byte("data: {")) {
			var n int
			fmt.Sscanf(string(line[bytes.Index(line, []byte(`"w`))+2:]), "%03d", &n)
			got <- n
			i++
		}
	}
	if !bytes.Equal(all.Bytes(), sentAll.Bytes()) {
		t.Errorf("the stream through the proxy differs from what the upstream sent")
	}
}

// blockedWriter stands for a disk that does not return until released.
type blockedWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (b *blockedWriter) Write(p []byte) (int, error) {
	<-b.release
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// TestSlowDiskNeverBlocksAgents: with the output stuck, every conversation
// written immediately (a 1 ns idle time) and room for one trace in the write
// queue, 40 agents' requests all come back while the disk is still stuck (it
// is released only after the last answer), and the traces the disk could not
// take are counted as dropped. The only wall-clock bound is a hang guard.
func TestSlowDiskNeverBlocksAgents(t *testing.T) {
	const hang = 60 * time.Second
	srv := httptest.NewServer(&fakeUpstream{})
	defer srv.Close()
	out := &blockedWriter{release: make(chan struct{})}
	var release sync.Once
	unstick := func() { release.Do(func() { close(out.release) }) }
	defer unstick()
	p := startRecorder(t, srv.URL, Options{Out: out, Idle: time.Nanosecond, WriteQueue: 1})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chat(t, p.url, msgs(fmt.Sprintf("user:conversation number %d", i)), true, true)
		}()
	}
	answered := make(chan struct{})
	go func() { wg.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(hang):
		unstick()
		t.Fatalf("the 40 requests had not all come back %v after they were sent, with the disk stuck: the proxy waits for the disk", hang)
	}
	// every answer is back and the disk is still stuck; the recorder
	// assembles each request after its answer, so wait for the 40th
	deadline := time.Now().Add(hang)
	for p.rec.Stats().Recorded < 40 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	st := p.rec.Stats()
	// one trace is in the stuck write, one waits in the queue, one may not
	// be closed yet: the rest drop
	if st.DroppedSlowDisk < 37 {
		t.Errorf("%d traces dropped for the slow disk, want at least 37: %s", st.DroppedSlowDisk, st)
	}
	if !strings.Contains(st.String(), fmt.Sprintf("%d traces dropped (disk too slow)", st.DroppedSlowDisk)) {
		t.Errorf("summary %q does not give the drops", st.String())
	}
	unstick()
	p.stop(t)
	st = p.rec.Stats()
	ts, err := trace.Read(bytes.NewReader(out.buf.Bytes()), "out")
	if err != nil || int64(len(ts)) != st.TracesWritten || st.TracesWritten+st.DroppedSlowDisk != 40 {
		t.Fatalf("%d traces read back (%v); %s", len(ts), err, st)
	}
}

// fullDisk writes half of its second write, then fails as a full disk does.
type fullDisk struct {
	buf    bytes.Buffer
	good   int
	writes int
}

func (f *fullDisk) Write(p []byte) (int, error) {
	f.writes++
	if f.writes == 2 {
		f.buf.Write(p[:len(p)/2])
		return len(p) / 2, errors.New("write: no space left on device")
	}
	return f.buf.Write(p)
}
func (f *fullDisk) Mark() error   { f.good = f.buf.Len(); return nil }
func (f *fullDisk) Rewind() error { f.buf.Truncate(f.good); return nil }

// TestFullDiskDropsOneTraceAndKeepsTheFileWhole: the failed write is undone,
// counted, and the traces before and after it read back.
func TestFullDiskDropsOneTraceAndKeepsTheFileWhole(t *testing.T) {
	srv := httptest.NewServer(&fakeUpstream{})
	defer srv.Close()
	out := &fullDisk{}
	p := startRecorder(t, srv.URL, Options{Out: out, Gzip: true, Idle: time.Nanosecond})
	for i := range 3 {
		chat(t, p.url, msgs(fmt.Sprintf("user:conversation number %d", i)), true, true)
		time.Sleep(20 * time.Millisecond) // one at a time, so the second write is the second trace
	}
	p.stop(t)
	st := p.rec.Stats()
	if st.DroppedWriteError != 1 || st.TracesWritten != 2 {
		t.Errorf("stats: %s", st)
	}
	ts, err := trace.Read(bytes.NewReader(out.buf.Bytes()), "out")
	if err != nil || len(ts) != 2 {
		t.Fatalf("read back %d traces: %v", len(ts), err)
	}
}

// TestFileRewind: a recording file cut back after a partial write ends
// with its last whole trace, and takes more.
func TestFileRewind(t *testing.T) {
	path := t.TempDir() + "/r.jsonl"
	f, err := CreateFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("one\n"))
	f.Mark()
	f.Write([]byte("tw"))
	if err := f.Rewind(); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("three\n"))
	f.Mark()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateFile(path, false); err == nil || !strings.Contains(err.Error(), "--append") {
		t.Errorf("creating over a recording: %v, want a pointer to --append", err)
	}
	g, err := CreateFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("four\n"))
	g.Close()
	if b, _ := readFile(path); b != "one\nthree\nfour\n" {
		t.Errorf("file holds %q", b)
	}
}

// TestQueueFullPassesRequestsUnrecorded: a recorder with no room passes
// every request through and counts it.
func TestQueueFullPassesRequestsUnrecorded(t *testing.T) {
	srv := httptest.NewServer(&fakeUpstream{})
	defer srv.Close()
	p := startRecorder(t, srv.URL, Options{QueueBytes: 1})
	for i := range 5 {
		chat(t, p.url, msgs(fmt.Sprintf("user:a long enough prompt %d", i)), true, true)
	}
	p.stop(t)
	if st := p.rec.Stats(); st.DroppedQueue != 5 || st.Recorded != 0 {
		t.Errorf("stats: %s", st)
	}
}

// TestTokenBlocksAndEstimates: with an upstream whose /tokenize gives ids,
// blocks are 64 tokens and a prompt that extends another shares its blocks;
// without usage the lengths are estimated (prompt from the ids, answer from
// the stream's token events) and counted.
func TestTokenBlocksAndEstimates(t *testing.T) {
	srv := httptest.NewServer(&fakeUpstream{tokens: true})
	defer srv.Close()
	p := startRecorder(t, srv.URL, Options{})
	v := newVocabulary(5)
	first := msgs("system:"+v.words(100), "user:"+v.words(100))
	chat(t, p.url, first, true, false)
	second := append(first, msgs("assistant:"+v.words(10), "user:"+v.words(100))...)
	chat(t, p.url, second, true, false)
	p.stop(t)
	ts, err := trace.ReadPath(p.path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].BlockSize != BlockSize || len(ts[0].Requests) != 2 {
		t.Fatalf("traces: %+v", ts)
	}
	a, b := ts[0].Requests[0], ts[0].Requests[1]
	if a.In != 200 || b.In != 310 || a.Out != 5 {
		t.Errorf("in %d, %d and out %d: want 200, 310 (token ids) and 5 (events)", a.In, b.In, a.Out)
	}
	if len(a.HashIDs) != 3 || len(b.HashIDs) != 4 || fmt.Sprint(b.HashIDs[:3]) != fmt.Sprint(a.HashIDs) {
		t.Errorf("hash ids %v then %v: want 3 blocks, then the same 3 and one more", a.HashIDs, b.HashIDs)
	}
	st := p.rec.Stats()
	if st.Tokenize != "tokens" || st.EstimatedOut != 2 || st.EstimatedIn != 0 {
		t.Errorf("stats: %s", st)
	}
}

func readFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

// closedAfterEOF is an agent's request body as the server has it once the
// answer's header went out: read to its end, then closed.
type closedAfterEOF struct{ done bool }

func (c *closedAfterEOF) Read(p []byte) (int, error) {
	if c.done {
		return 0, http.ErrBodyReadAfterClose
	}
	c.done = true
	return copy(p, "{}"), io.EOF
}
func (c *closedAfterEOF) Close() error { return nil }

// TestTeeBodyStaysAtEOF: the transport reads once more past the end of a
// request body; the copy must answer io.EOF then, not the closed body's
// error (which made the transport drop the upstream connection mid-answer:
// "use of closed network connection" in about one run in three of
// TestRecordAndReplay).
func TestTeeBodyStaysAtEOF(t *testing.T) {
	x := &exchange{reqDone: make(chan struct{})}
	tb := &teeBody{rc: &closedAfterEOF{}, x: x}
	buf := make([]byte, 8)
	if n, err := tb.Read(buf); n != 2 || err != io.EOF {
		t.Fatalf("first read: %d, %v", n, err)
	}
	if n, err := tb.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("read past the end: %d, %v; want 0, io.EOF", n, err)
	}
	if string(x.req) != "{}" {
		t.Errorf("copy %q", x.req)
	}
}

// TestAgentLeavesMidStream: an agent that hangs up after the first chunk
// ends the upstream request, and the request is recorded with the part of
// the answer that passed (no usage came: its length is estimated).
func TestAgentLeavesMidStream(t *testing.T) {
	left := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 100 {
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d\"}}]}\n\n", i); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(left)
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		t.Error("the upstream streamed to the end: the agent's hang-up did not reach it")
	}))
	defer srv.Close()
	p := startRecorder(t, srv.URL, Options{})
	data, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs("user:go"), "stream": true})
	resp, err := http.Post(p.url+"/v1/chat/completions", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	if !strings.Contains(line, "w0") {
		t.Fatalf("first line %q", line)
	}
	select {
	case <-left:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream never saw the agent leave")
	}
	p.stop(t)
	st := p.rec.Stats()
	ts, err := trace.ReadPath(p.path)
	if err != nil || st.Recorded != 1 || len(ts) != 1 {
		t.Fatalf("%d traces (%v); %s", len(ts), err, st)
	}
	if st.Cut != 1 {
		t.Errorf("%d streams counted as cut off, want 1: %s", st.Cut, st)
	}
	if r := ts[0].Requests[0]; r.Out < 1 || r.Out > 100 || st.EstimatedOut != 1 {
		t.Errorf("out %d (estimated %d times): want the chunks that passed", r.Out, st.EstimatedOut)
	}
}
