package eval

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fault is how the fake server gets an answer wrong.
type fault int

const (
	good        fault = iota // valid calls, right facts
	brokenArgs               // truncated JSON arguments
	invalidArgs              // JSON arguments missing a required field
	objectArgs               // arguments as a JSON object instead of a string
	wrongTool                // a valid call to another offered tool
	unknownTool              // a call to a tool that was not offered
	noTool                   // plain text where a call belongs
	slow                     // never answers; waits for the client to leave
	refuse                   // HTTP 400
	serverErr                // HTTP 500
	garbage                  // a 200 whose body is not a completion
	everyOther               // brokenArgs on every second request, good otherwise
	underLoad                // brokenArgs when more than one request is in flight
)

// validArgs are arguments that satisfy each built-in tool's schema.
var validArgs = map[string]string{
	"Read":          `{"file_path":"/repo/internal/server/handler.go"}`,
	"Edit":          `{"file_path":"/repo/a.go","old_string":"func f(","new_string":"func g("}`,
	"Write":         `{"file_path":"/repo/doc.go","content":"package x\n"}`,
	"Bash":          `{"command":"go test ./...","timeout":120000}`,
	"Grep":          `{"pattern":"retryBudget","path":"/repo/internal","output_mode":"files_with_matches"}`,
	"Glob":          `{"pattern":"**/*_test.go","path":"/repo/internal"}`,
	"create_ticket": `{"title":"Login returns HTTP 500","kind":"bug","priority":"high","labels":["login"]}`,
}

// customAnswers are the right answers to the text cases of
// examples/evals/custom.jsonl, keyed by a piece of their prompt.
var customAnswers = map[string]string{
	"17 * 3":                  "51",
	"prints the installed Go": "`go version`",
	"healthy service":         "```json\n{\"status\": \"ok\", \"latency_ms\": 40}\n```",
}

var (
	useToolRe = regexp.MustCompile(`Use the (\w+) tool`)
	codeRe    = regexp.MustCompile(regexp.QuoteMeta(FactLead) + `(\S+?)\.`)
)

// fakeServer is an OpenAI-compatible chat endpoint that answers eval
// requests the way a correct model would, unless its fault says otherwise.
type fakeServer struct {
	*httptest.Server
	fault     fault
	stream    bool // answer in SSE when the request asks for it
	barrier   int  // when > 1, hold each request until this many are in flight
	requests  atomic.Int64
	inflight  atomic.Int64
	maxTokens sync.Map // request number -> max_tokens it carried (nil when absent)
	left      chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
}

func newFakeServer(t *testing.T, f fault) *fakeServer {
	t.Helper()
	s := &fakeServer{fault: f, left: make(chan struct{}, 64)}
	s.cond = sync.NewCond(&s.mu)
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

type fakeRequest struct {
	Messages  []Message `json:"messages"`
	Tools     []Tool    `json:"tools"`
	MaxTokens *int      `json:"max_tokens"`
	Stream    bool      `json:"stream"`
}

func (s *fakeServer) handle(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	inflight := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	var req fakeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.maxTokens.Store(n, req.MaxTokens)
	if s.barrier > 1 {
		s.mu.Lock()
		s.arrived++
		gen := (s.arrived - 1) / s.barrier
		for s.arrived < (gen+1)*s.barrier {
			s.cond.Wait()
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		inflight = int64(s.barrier)
	}
	f := s.fault
	switch {
	case f == everyOther && n%2 == 0, f == underLoad && inflight > 1:
		f = brokenArgs
	case f == everyOther, f == underLoad:
		f = good
	}
	switch f {
	case slow:
		<-r.Context().Done()
		s.left <- struct{}{}
		return
	case refuse:
		http.Error(w, `{"error":{"message":"This model's maximum context length is 10 tokens."}}`, http.StatusBadRequest)
		return
	case serverErr:
		http.Error(w, "engine died", http.StatusInternalServerError)
		return
	case garbage:
		fmt.Fprint(w, "<html>gateway</html>")
		return
	}
	content, calls := s.answer(f, req)
	if req.Stream && s.stream {
		s.writeStream(w, content, calls)
		return
	}
	msg := map[string]any{"role": "assistant", "content": content}
	finish := "stop"
	if len(calls) > 0 {
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id":      "chatcmpl-test",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 5},
	})
}

// answer returns the text and tool calls the fault calls for.
func (s *fakeServer) answer(f fault, req fakeRequest) (string, []map[string]any) {
	last := req.Messages[len(req.Messages)-1].Content
	if len(req.Tools) == 0 {
		if m := codeRe.FindStringSubmatch(last); m != nil {
			return m[1], nil
		}
		for k, v := range customAnswers {
			if strings.Contains(last, k) {
				return v, nil
			}
		}
		return "no idea", nil
	}
	name := req.Tools[0].Function.Name
	if m := useToolRe.FindStringSubmatch(last); m != nil {
		name = m[1]
	}
	var args any = validArgs[name]
	switch f {
	case noTool:
		return `<tool_call>{"name": "` + name + `"`, nil
	case wrongTool:
		for _, t := range req.Tools {
			if t.Function.Name != name {
				name = t.Function.Name
				break
			}
		}
		args = validArgs[name]
	case unknownTool:
		name = "Delete"
	case brokenArgs:
		a := validArgs[name]
		args = a[:len(a)-5]
	case invalidArgs:
		args = `{"unexpected": true}`
	case objectArgs:
		args = json.RawMessage(validArgs[name])
	}
	return "", []map[string]any{{"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": args}}}
}

// writeStream sends the answer as SSE chunks, splitting tool-call arguments
// into fragments as engines do.
func (s *fakeServer) writeStream(w http.ResponseWriter, content string, calls []map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk(map[string]any{"role": "assistant"}, nil)
	for _, word := range strings.SplitAfter(content, " ") {
		if word != "" {
			chunk(map[string]any{"content": word}, nil)
		}
	}
	for i, c := range calls {
		fnc := c["function"].(map[string]any)
		args, isString := fnc["arguments"].(string)
		head := map[string]any{"index": i, "id": c["id"], "type": "function", "function": map[string]any{"name": fnc["name"], "arguments": ""}}
		if !isString {
			head["function"].(map[string]any)["arguments"] = fnc["arguments"]
		}
		chunk(map[string]any{"tool_calls": []any{head}}, nil)
		for len(args) > 0 {
			k := min(7, len(args))
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"name": fnc["name"], "arguments": args[:k]}}}}, nil)
			args = args[k:]
		}
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	chunk(map[string]any{}, finish)
	fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n")
}
