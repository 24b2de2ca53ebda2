package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// FuzzStream feeds SSE bodies (seeded with the fixtures and their chunks)
// to the stream parser and checks that it never panics, that its counts
// hold together, and that on every chunk the fast path is sure of, the
// chunk is valid JSON and the full decode agrees with it.
//
//	go test ./internal/load -run '^$' -fuzz FuzzStream -fuzztime 60s
func FuzzStream(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "streams", "*.sse"))
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
		for _, line := range bytes.Split(body, []byte("\n")) {
			if p, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				f.Add(p)
			}
		}
	}
	for _, c := range chunkCases {
		f.Add([]byte(c.p))
	}
	f.Add([]byte("data: " + strings.Join(memoStream, "\n\ndata: ") + "\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var res Result
		done, err := readSSE(bufio.NewReaderSize(bytes.NewReader(body), 64), &res)
		if done && err != nil {
			t.Fatalf("done and error %v", err)
		}
		if res.Chunks != res.ReasoningChunks+res.AnswerChunks || (res.Chunks > 0) == res.First.IsZero() || (res.AnswerChunks > 0) == res.FirstAnswer.IsZero() {
			t.Fatalf("counts do not hold together: %+v", res)
		}
		agree(t, body, nil) // the body itself as one chunk: mutations reach the JSON directly
		var memo fastMemo   // shared by the body's chunks, as in a stream
		for _, line := range bytes.Split(body, []byte("\n")) {
			if p, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
				agree(t, trimSpace(p), &memo)
			}
		}
	})
}

// agree fails t when the fast path is sure of p but p is not valid JSON or
// the full decode says otherwise, or when memo changes its answer.
func agree(t *testing.T, p []byte, memo *fastMemo) {
	fast, sure := classifyFast(p, memo)
	if memo != nil {
		if alone, aloneSure := classifyFast(p, nil); alone != fast || aloneSure != sure {
			t.Fatalf("with the memo %+v (sure %v), alone %+v (sure %v) for %q", fast, sure, alone, aloneSure, p)
		}
	}
	if !sure {
		return
	}
	if !json.Valid(p) {
		t.Fatalf("fast path is sure of invalid JSON %q", p)
	}
	full, err := classifyFull(p)
	if err != nil || full != fast {
		t.Fatalf("fast path %+v, full decode %+v (%v) for %q", fast, full, err, p)
	}
}

// endless is an SSE line that never ends: "data: " and then x for ever.
type endless struct{ read int }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	if e.read == 0 {
		copy(p, "data: ")
	}
	e.read += len(p)
	return len(p), nil
}

// TestStreamLineMemory checks that a line that never ends is a stream error
// once it passes MaxSSELine, and that the client stops reading there and
// allocates about twice the limit, not what the server sends.
func TestStreamLineMemory(t *testing.T) {
	src := &endless{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var res Result
	_, err := readSSE(bufio.NewReaderSize(src, 32<<10), &res)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "longer than 16 MiB") {
		t.Fatalf("error %v, want one naming the 16 MiB limit", err)
	}
	if src.read > MaxSSELine+64<<10 {
		t.Errorf("read %d bytes of the line, want at most the limit and a buffer", src.read)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*MaxSSELine {
		t.Errorf("allocated %d MiB for one over-long line, want at most %d", alloc>>20, 3*MaxSSELine>>20)
	}
}
