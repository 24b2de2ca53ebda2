package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sseServer answers every chat completion with n token chunks and a usage
// chunk, the way vLLM streams them.
func sseServer(t *testing.T, n int, handler func(w http.ResponseWriter, r *http.Request) bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if handler != nil && handler(w, r) {
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream_options":{"include_usage":true}`) || !strings.Contains(string(body), `"max_tokens":`) {
			http.Error(w, "missing stream_options or max_tokens", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok%d "},"finish_reason":null}]}`+"\n\n", i)
			fl.Flush()
		}
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":`+fmt.Sprint(n)+`,"total_tokens":130,"prompt_tokens_details":{"cached_tokens":64}}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStreamReadsTokensAndUsage(t *testing.T) {
	srv := sseServer(t, 10, nil)
	c := NewClient(srv.URL, "m")
	defer c.Close()
	before := time.Now()
	res := c.Stream(context.Background(), []byte("a b c"), 10, 5*time.Second)
	if res.Error != "" {
		t.Fatalf("error %s: %s", res.Error, res.Detail)
	}
	if res.Status != 200 || res.PromptTokens != 120 || res.Cached != 64 || res.OutputTokens != 10 || res.Chunks != 10 {
		t.Errorf("result = %+v, want status 200, 120 prompt, 64 cached, 10 output, 10 chunks", res)
	}
	// the role-only first chunk carries no token: first must not be before the first content chunk
	if res.First.Before(before) || res.Last.Before(res.First) {
		t.Errorf("first %v last %v out of order", res.First, res.Last)
	}
}

func TestStreamClassifiesFailures(t *testing.T) {
	cases := []struct {
		name    string
		handler func(w http.ResponseWriter, r *http.Request) bool
		timeout time.Duration
		want    string
	}{
		// vLLM refuses an over-long prompt with 400: a refusal, which is an error.
		{"refusal", func(w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, `{"object":"error","message":"maximum context length","type":"BadRequestError","code":400}`, 400)
			return true
		}, time.Second, ErrRefused},
		// Overload answers 503.
		{"server error", func(w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, "overloaded", 503)
			return true
		}, time.Second, ErrServer},
		// A stream that stalls past the deadline is a timeout.
		{"timeout", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return true
		}, 100 * time.Millisecond, ErrTimeout},
		// A stream cut before [DONE] is broken.
		{"cut stream", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"content":"x"}}]}`+"\n\n")
			return true
		}, time.Second, ErrStream},
		// An error object inside the stream is a stream error.
		{"error in stream", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"error":{"message":"engine died","code":500}}`+"\n\n")
			return true
		}, time.Second, ErrStream},
		// A server that streams tokens but no usage cannot be cross-checked.
		{"no usage", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"content":"x"}}]}`+"\n\ndata: [DONE]\n\n")
			return true
		}, time.Second, ErrNoUsage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := sseServer(t, 1, c.handler)
			cl := NewClient(srv.URL, "m")
			defer cl.Close()
			if res := cl.Stream(context.Background(), []byte("p"), 4, c.timeout); res.Error != c.want {
				t.Errorf("error class %q (%s), want %q", res.Error, res.Detail, c.want)
			}
		})
	}
}

func TestStreamConnectionRefused(t *testing.T) {
	srv := sseServer(t, 1, nil)
	url := srv.URL
	srv.Close()
	cl := NewClient(url, "m")
	if res := cl.Stream(context.Background(), []byte("p"), 4, time.Second); res.Error != ErrConnect {
		t.Errorf("error class %q (%s), want %q", res.Error, res.Detail, ErrConnect)
	}
}

func TestStreamAbortOnCancel(t *testing.T) {
	srv := sseServer(t, 1, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return true
	})
	cl := NewClient(srv.URL, "m")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if res := cl.Stream(ctx, []byte("p"), 4, time.Minute); res.Error != ErrAborted {
		t.Errorf("error class %q, want %q", res.Error, ErrAborted)
	}
}

func TestBodyIsValidJSON(t *testing.T) {
	cases := []struct{ model, prompt string }{
		{"glm-5.3", "plain placeholder words"},      // the fast path: nothing to escape
		{`m"x`, "a \"quoted\" line\nand a tab\t é"}, // escaping needed in both
	}
	for _, c := range cases {
		cl := NewClient("http://127.0.0.1:1", c.model)
		var buf bytes.Buffer
		cl.body(&buf, []byte(c.prompt), 7)
		var got struct {
			Model    string `json:"model"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
			MaxTokens int `json:"max_tokens"`
		}
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("body %s is not JSON: %v", buf.Bytes(), err)
		}
		if got.Model != c.model || len(got.Messages) != 1 || got.Messages[0].Content != c.prompt || got.MaxTokens != 7 {
			t.Errorf("body decodes to %+v", got)
		}
	}
}

// TestRecordReasoningFieldsAreAdditive checks that the reasoning fields are
// left out of a record without reasoning, so records stay version 1, and
// that a version-1 record written before them still decodes.
func TestRecordReasoningFieldsAreAdditive(t *testing.T) {
	plain, err := json.Marshal(Record{V: RecordVersion, FirstToken: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"reasoning_tokens", "reasoning_chunks", "answer_chunks", "first_answer_s"} {
		if strings.Contains(string(plain), key) {
			t.Errorf("record without reasoning has %q: %s", key, plain)
		}
	}
	old := `{"v":1,"step":0,"sessions":1,"phase":"measure","lane":0,"session":"s","tier":"t","play":0,"turn":0,"planned_prompt_tokens":10,"served_prompt_tokens":10,"cached_tokens":0,"ideal_cached_tokens":0,"max_tokens":4,"output_tokens":4,"send_s":1,"first_token_s":1.2,"last_token_s":1.4,"status":200}`
	recs, err := DecodeRecords(strings.NewReader(old+"\n"), "old.jsonl")
	if err != nil || len(recs) != 1 || recs[0].OutputTokens != 4 || recs[0].ReasoningChunks != 0 {
		t.Fatalf("old record decodes to %+v, %v", recs, err)
	}
	withReasoning := Record{V: RecordVersion, ReasoningTokens: 90, ReasoningChunks: 80, AnswerChunks: 10, FirstToken: 1.2, FirstAnswer: 3.4}
	b, _ := json.Marshal(withReasoning)
	recs, err = DecodeRecords(bytes.NewReader(append(b, '\n')), "new.jsonl")
	if err != nil || len(recs) != 1 || recs[0] != withReasoning {
		t.Fatalf("%s decodes to %+v, %v", b, recs, err)
	}
}

// plainJSON reads eight bytes at a time; it must agree with a byte loop for
// every byte value at every position in a word and in the tail.
func TestPlainJSONMatchesByteLoop(t *testing.T) {
	slow := func(s []byte) bool {
		for _, b := range s {
			if b < 0x20 || b == '"' || b == '\\' || b >= 0x80 {
				return false
			}
		}
		return true
	}
	for n := 0; n <= 70; n++ {
		for pos := 0; pos < n; pos++ {
			for v := 0; v < 256; v++ {
				s := bytes.Repeat([]byte("abc de!~"), 9)[:n]
				s[pos] = byte(v)
				if got, want := plainJSON(s), slow(s); got != want {
					t.Fatalf("plainJSON(%q) = %v, want %v", s, got, want)
				}
			}
		}
	}
}

// The request body the client sends is byte for byte what body writes,
// whether or not the prompt needs escaping, read whole, in small reads, or
// again for a resend.
func TestRequestBodyMatchesBody(t *testing.T) {
	for _, c := range []struct{ model, prompt string }{
		{"glm-5.3", "plain placeholder words with more than eight bytes"},
		{"glm-5.3", ""},
		{`m"x`, "plain"},
		{"m", "a \"quoted\" line\nand a tab\t é"},
	} {
		cl := NewClient("http://127.0.0.1:1", c.model)
		var want, buf bytes.Buffer
		cl.body(&want, []byte(c.prompt), 7)
		b := cl.requestBody(&buf, []byte(c.prompt), 7)
		if b.Len() != want.Len() {
			t.Errorf("%q: Len %d, want %d", c.prompt, b.Len(), want.Len())
		}
		var small []byte
		again := b.again()
		p := make([]byte, 3)
		for {
			n, err := b.Read(p)
			small = append(small, p[:n]...)
			if err == io.EOF {
				break
			}
		}
		var whole bytes.Buffer
		if _, err := again.WriteTo(&whole); err != nil {
			t.Fatal(err)
		}
		if string(small) != want.String() || whole.String() != want.String() {
			t.Errorf("%q: read %s and %s, want %s", c.prompt, small, whole.Bytes(), want.Bytes())
		}
	}
}

// StreamReleasing gives the prompt back once the server has the request
// and answered its head, before the answer's stream ends, and only once.
func TestStreamReleasesThePrompt(t *testing.T) {
	var released atomic.Int32
	relCh := make(chan struct{})
	early := make(chan bool, 1)
	srv := sseServer(t, 3, func(w http.ResponseWriter, r *http.Request) bool {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"content":"a b c"`) {
			http.Error(w, "prompt not sent: "+string(body), 400)
			return true
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select { // the answer goes on only once the prompt is released
		case <-relCh:
			early <- true
		case <-time.After(5 * time.Second):
			early <- false
		}
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
		return true
	})
	c := NewClient(srv.URL, "m")
	defer c.Close()
	res := c.StreamReleasing(context.Background(), []byte("a b c"), 4, 10*time.Second, func() {
		if released.Add(1) == 1 {
			close(relCh)
		}
	})
	if res.Error != "" {
		t.Fatalf("%s: %s", res.Error, res.Detail)
	}
	if before := <-early; !before || released.Load() != 1 {
		t.Errorf("released %d times, before the answer went on: %v; want once, before", released.Load(), before)
	}
}
