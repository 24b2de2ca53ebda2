package load

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// streamCase is what one fixture stream must parse to.
type streamCase struct {
	file string // under testdata/streams; "" for a generated body
	body func() []byte
	gen  string // the generated body's name
	// fast: every chunk without usage or error is one the fast path is sure of.
	fast                       bool
	reasoning, answer          int // token chunks
	prompt, completion, cached int
	reasoningTokens            int
	class                      string // error class; "" for success
	detail                     string // in the error detail
}

// streamCases are the fixtures written by hand from each server's sources
// and docs (the first line of each file names what was read).
var streamCases = []streamCase{
	// vLLM: role chunk with content "", "usage":null on every chunk, cached tokens.
	{file: "vllm_chat.sse", fast: true, answer: 4, prompt: 1843, completion: 5, cached: 1792},
	// vLLM's reasoning parsers: delta.reasoning, then content.
	{file: "vllm_reasoning.sse", fast: true, reasoning: 3, answer: 2, prompt: 96, completion: 14},
	// Older vLLM: delta.reasoning_content; max_tokens cut the thinking, no
	// answer: a successful request all the same.
	{file: "vllm_reasoning_content_capped.sse", fast: true, reasoning: 3, prompt: 40, completion: 3},
	// /v1/completions: choices[].text.
	{file: "vllm_completions.sse", fast: true, answer: 2, prompt: 5, completion: 2},
	// Tool-call deltas are answer tokens.
	{file: "vllm_tool_calls.sse", fast: true, answer: 3, prompt: 310, completion: 21},
	// SGLang: reasoning_content null beside content, matched_stop.
	{file: "sglang_chat.sse", fast: true, answer: 3, prompt: 2048, completion: 4, cached: 2000},
	// SGLang reasoning; reasoning_tokens at the top of usage.
	{file: "sglang_reasoning.sse", fast: true, reasoning: 2, answer: 2, prompt: 512, completion: 18, reasoningTokens: 9},
	// llama.cpp: keys in its own order, content null, empty last delta,
	// usage chunk with "timings".
	{file: "llamacpp_chat.sse", fast: true, answer: 3, prompt: 1085, completion: 3, cached: 1024},
	// llama.cpp reasoning_content with per-token timings.
	{file: "llamacpp_reasoning_timings.sse", fast: true, reasoning: 2, answer: 1, prompt: 12, completion: 7},
	// Older llama.cpp: usage in the chunk with the final choice.
	{file: "llamacpp_usage_in_last_choice.sse", fast: true, answer: 2, prompt: 9, completion: 2},
	// Ollama's /v1: role on every delta, usage without cached tokens.
	{file: "ollama_chat.sse", fast: true, answer: 3, prompt: 31, completion: 4},
	// Ollama reasoning beside an empty content.
	{file: "ollama_reasoning.sse", fast: true, reasoning: 2, answer: 1, prompt: 14, completion: 9},
	// TGI's Messages API: object first, "usage":null, usage chunk last.
	{file: "tgi_chat.sse", fast: true, answer: 3, prompt: 40, completion: 3},
	// LiteLLM compact: reasoning_content, usage beside an empty choice,
	// completion_tokens_details.reasoning_tokens.
	{file: "litellm_compact_reasoning.sse", fast: true, reasoning: 2, answer: 1, prompt: 64, completion: 12, reasoningTokens: 10},
	// LiteLLM through json.dumps: spaces after ":" and ","; nulls everywhere.
	{file: "litellm_spaced.sse", answer: 2, prompt: 11, completion: 2, cached: 8},
	// OpenAI: refusal null, obfuscation, empty choices in the usage chunk.
	{file: "openai_chat.sse", fast: true, answer: 2, prompt: 1200, completion: 2, cached: 1024},
	// OpenAI reasoning models: reasoning only in usage.
	{file: "openai_reasoning_usage.sse", fast: true, answer: 1, prompt: 25, completion: 210, reasoningTokens: 192},
	// SSE framing: CRLF, comments, event/id/retry, "data:" without a space.
	{file: "sse_framing_crlf.sse", fast: true, answer: 2, prompt: 7, completion: 2},
	// A chunk spread over several data lines of one event.
	{file: "sse_multiline_data.sse", answer: 2, prompt: 3, completion: 2},

	// A cut chunk before a valid usage chunk: a stream error (issue 12.6).
	{file: "neg_invalid_chunk_then_usage.sse", fast: true, answer: 1, class: ErrStream, detail: "not a JSON object"},
	{file: "neg_not_json.sse", fast: true, answer: 1, class: ErrStream, detail: `"upstream timed out"`},
	// "content":"" is no token.
	{file: "neg_empty_content.sse", fast: true, prompt: 10, class: ErrEmptyAnswer},
	// "content":null and empty deltas are no token.
	{file: "neg_null_content.sse", fast: true, prompt: 5, class: ErrEmptyAnswer},
	{file: "neg_vllm_error_midstream.sse", fast: true, answer: 1, class: ErrStream, detail: "error in stream"},
	{file: "neg_litellm_error_midstream.sse", fast: true, answer: 1, class: ErrStream, detail: "APIConnectionError"},
	{file: "neg_error_event.sse", fast: true, answer: 1, class: ErrStream, detail: "error event"},
	{file: "neg_no_done.sse", fast: true, answer: 1, prompt: 8, completion: 1, class: ErrStream, detail: "[DONE]"},
	{file: "neg_no_usage.sse", fast: true, answer: 1, class: ErrNoUsage},
	// A line over MaxSSELine is a stream error, however it would end.
	{gen: "over_long_line", body: overLongLine, answer: 1, class: ErrStream, detail: "longer than 16 MiB"},
	// A chunk cut by the end of the stream, no line end after it.
	{gen: "cut_at_eof", body: func() []byte {
		return []byte(`data: {"choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n" + `data: {"choices":[{"index":0,"delta":{"content":"b`)
	}, answer: 1, class: ErrStream, detail: "ended inside an event"},
}

// overLongLine is a token chunk, then a data line one byte over
// MaxSSELine, then a usage chunk and [DONE].
func overLongLine() []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n")
	b.WriteString(`data: {"choices":[{"index":0,"delta":{"content":"`)
	b.Write(bytes.Repeat([]byte("x"), MaxSSELine))
	b.WriteString(`"}}]}` + "\n\n")
	b.WriteString(`data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}` + "\n\ndata: [DONE]\n\n")
	return b.Bytes()
}

func (sc streamCase) name() string {
	if sc.file != "" {
		return strings.TrimSuffix(sc.file, ".sse")
	}
	return "generated_" + sc.gen
}

func (sc streamCase) load(t testing.TB) []byte {
	t.Helper()
	if sc.body != nil {
		return sc.body()
	}
	b, err := os.ReadFile(filepath.Join("testdata", "streams", sc.file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// check compares a Result with the case's expectations.
func (sc streamCase) check(t *testing.T, res Result) {
	t.Helper()
	if res.Error != sc.class || !strings.Contains(res.Detail, sc.detail) {
		t.Errorf("error %q (%s), want %q with %q in the detail", res.Error, res.Detail, sc.class, sc.detail)
	}
	if res.ReasoningChunks != sc.reasoning || res.AnswerChunks != sc.answer || res.Chunks != sc.reasoning+sc.answer {
		t.Errorf("chunks %d (reasoning %d, answer %d), want reasoning %d, answer %d", res.Chunks, res.ReasoningChunks, res.AnswerChunks, sc.reasoning, sc.answer)
	}
	if res.PromptTokens != sc.prompt || res.OutputTokens != sc.completion || res.Cached != sc.cached || res.ReasoningTokens != sc.reasoningTokens {
		t.Errorf("usage prompt %d completion %d cached %d reasoning %d, want %d %d %d %d",
			res.PromptTokens, res.OutputTokens, res.Cached, res.ReasoningTokens, sc.prompt, sc.completion, sc.cached, sc.reasoningTokens)
	}
	// Stamps: the first token of any kind, then the first answer token.
	if (res.Chunks > 0) == res.First.IsZero() || (res.AnswerChunks > 0) == res.FirstAnswer.IsZero() {
		t.Errorf("first %v, first answer %v for %d chunks, %d answer", res.First, res.FirstAnswer, res.Chunks, res.AnswerChunks)
	}
	if !res.FirstAnswer.IsZero() && (res.FirstAnswer.Before(res.First) || res.Last.Before(res.FirstAnswer)) {
		t.Errorf("first %v, first answer %v, last %v out of order", res.First, res.FirstAnswer, res.Last)
	}
}

// TestStreamFixtures serves every fixture over HTTP to Client.Stream and
// checks the token chunks, the reasoning/answer split, the usage and the
// error class.
func TestStreamFixtures(t *testing.T) {
	for _, sc := range streamCases {
		t.Run(sc.name(), func(t *testing.T) {
			body := sc.load(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				fl := w.(http.Flusher)
				for len(body) > 0 { // one write and flush per line, as servers stream
					n := bytes.IndexByte(body, '\n') + 1
					if n == 0 {
						n = len(body)
					}
					w.Write(body[:n])
					fl.Flush()
					body = body[n:]
				}
			}))
			defer srv.Close()
			c := NewClient(srv.URL, "m")
			defer c.Close()
			sc.check(t, c.Stream(context.Background(), []byte("p"), 16, 30*time.Second))
		})
	}
}

// TestStreamFixturesTinyBuffer parses every fixture through a 16-byte
// bufio.Reader, so that every line takes the long-line path, and expects
// the same counts as TestStreamFixtures.
func TestStreamFixturesTinyBuffer(t *testing.T) {
	for _, sc := range streamCases {
		if sc.gen == "over_long_line" {
			continue // 16 MiB in 16-byte reads is slow and proves nothing more
		}
		t.Run(sc.name(), func(t *testing.T) {
			var res Result
			done, err := readSSE(bufio.NewReaderSize(bytes.NewReader(sc.load(t)), 16), &res)
			if (err != nil || !done) != (sc.class == ErrStream) {
				t.Errorf("done %v, error %v; want a stream error: %v", done, err, sc.class == ErrStream)
			}
			sc.class, sc.detail = "", "" // classes beyond ErrStream are Stream's
			sc.check(t, res)
		})
	}
}

// TestStreamFixturesFastPath checks that the fast path is sure of every
// token chunk of the compact fixtures (so they cost no decode) and agrees
// with the full decode on each.
func TestStreamFixturesFastPath(t *testing.T) {
	for _, sc := range streamCases {
		if sc.file == "" {
			continue
		}
		t.Run(sc.name(), func(t *testing.T) {
			var memo fastMemo
			for i, line := range bytes.Split(sc.load(t), []byte("\n")) {
				p, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
				if p = trimSpace(p); !ok || bytes.Equal(p, donePayload) {
					continue
				}
				full, err := classifyFull(p)
				fast, sure := classifyFast(p, &memo)
				if sure && (err != nil || fast != full) {
					t.Errorf("line %d: fast path says %+v, full decode %+v (%v)", i+1, fast, full, err)
				}
				if sc.fast && !sure && err == nil && !full.usage && !full.failed {
					t.Errorf("line %d: the fast path is not sure of a compact token chunk: %s", i+1, p)
				}
			}
		})
	}
}

// TestStreamFixturesHaveSources checks that every fixture file is in the
// table and opens with the comment naming what it was written from.
func TestStreamFixturesHaveSources(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "streams", "*.sse"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	inTable := map[string]bool{}
	for _, sc := range streamCases {
		inTable[sc.file] = true
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if !bytes.HasPrefix(b, []byte(": source: ")) {
			t.Errorf("%s does not start with a \": source: ...\" comment", f)
		}
		if !inTable[filepath.Base(f)] {
			t.Errorf("%s has no case in streamCases", f)
		}
	}
}
