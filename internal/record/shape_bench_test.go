package record

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkShape is the recorder's work for one request of an agent with a
// 10,000-word history in 30 messages, from its bytes to its shape.
func BenchmarkShape(b *testing.B) {
	v := newVocabulary(1)
	ms := msgs("system:" + v.words(4000))
	for range 14 {
		ms = append(ms, msgs("assistant:"+v.words(50), "user:"+v.words(380))...)
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": ms, "stream": true})
	resp := []byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10000,\"completion_tokens\":50}}\n\ndata: [DONE]\n\n")
	sh := newShaper()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		x := &exchange{arrival: time.Now(), end: time.Now(), req: body, resp: resp, reqDone: make(chan struct{}), status: 200}
		close(x.reqDone)
		if _, err := sh.r.shapeOf(x); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHop is one streamed request at a time with a 4,000-word prompt,
// straight to an in-process upstream and through the recorder in turn: the
// time to the first chunk on each path, without concurrency, so the figure
// is the hop's own cost. Reported: p50 and p99 of each, in µs.
func BenchmarkHop(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(benchChunk)
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4000,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	p := startRecorder(b, up.URL, Options{Tokenize: TokenizeOff, QueueBytes: int64(envInt("HEADROOM_BENCH_HOP_QUEUE", 0))})
	v := newVocabulary(9)
	body, _ := json.Marshal(map[string]any{"model": "bench", "stream": true, "messages": msgs("system:"+v.words(4000), "user:go")})
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	var direct, via []time.Duration
	for i := 0; b.Loop(); i++ {
		target, into := up.URL, &direct
		if i%2 == 1 {
			target, into = p.url, &via
		}
		d, err := firstToken(client, target, body)
		if err != nil {
			b.Fatal(err)
		}
		*into = append(*into, d)
	}
	q := func(ds []time.Duration, f float64) float64 {
		slices.Sort(ds)
		return float64(ds[min(len(ds)-1, int(f*float64(len(ds))))].Microseconds())
	}
	if len(via) > 0 {
		b.ReportMetric(q(direct, 0.5), "direct-p50-µs")
		b.ReportMetric(q(direct, 0.99), "direct-p99-µs")
		b.ReportMetric(q(via, 0.5), "proxy-p50-µs")
		b.ReportMetric(q(via, 0.99), "proxy-p99-µs")
	}
}
