package load

import (
	"testing"
)

// chunkCases are the chunk shapes the fixtures do not cover: the cases
// where the fast path must step aside, and the full decode's rules. They
// seed FuzzStream too.
var chunkCases = []struct {
	name    string
	p       string
	sure    bool // the fast path is sure of it
	want    chunk
	wantErr bool
}{
	{"compact content", `{"choices":[{"index":0,"delta":{"content":"x"}}]}`, true, chunk{answer: true}, false},
	{"empty object", `{}`, true, chunk{}, false},
	// Two choices: answer in one, reasoning in the other.
	{"two choices", `{"choices":[{"index":0,"delta":{"content":"x"}},{"index":1,"delta":{"reasoning":"y"}}]}`, true, chunk{answer: true, reasoning: true}, false},
	// A delta outside choices is not a token.
	{"delta elsewhere", `{"extra":{"delta":{"content":"x"}},"choices":[]}`, true, chunk{}, false},
	{"misspelt choices", `{"choicez":[{"delta":{"content":"x"}}]}`, true, chunk{}, false},
	{"empty tool calls", `{"choices":[{"delta":{"tool_calls":[]}}]}`, true, chunk{}, false},
	{"tool call", `{"choices":[{"delta":{"tool_calls":[{}]}}]}`, true, chunk{answer: true}, false},
	{"function call", `{"choices":[{"delta":{"function_call":{"arguments":"{"}}}]}`, true, chunk{answer: true}, false},
	{"refusal", `{"choices":[{"delta":{"refusal":"no"}}]}`, true, chunk{answer: true}, false},
	{"escaped content", `{"choices":[{"delta":{"content":"\u00e9\n"}}]}`, true, chunk{answer: true}, false},
	{"error null", `{"error":null,"choices":[{"delta":{"content":"x"}}],"usage":null}`, true, chunk{answer: true}, false},
	{"numbers and literals", `{"a":[-1.5e+3,0,true,false,null,{}],"choices":[{"delta":{"content":"x"}}]}`, true, chunk{answer: true}, false},

	// encoding/json lets the last duplicate win: the fast path steps aside.
	{"duplicate content", `{"choices":[{"delta":{"content":"x","content":""}}]}`, false, chunk{}, false},
	{"duplicate choices", `{"choices":[{"delta":{"content":"x"}}],"choices":[]}`, false, chunk{}, false},
	// encoding/json matches keys case-insensitively.
	{"key case", `{"choices":[{"delta":{"Content":"x"}}]}`, false, chunk{answer: true}, false},
	{"escaped key", `{"choices":[{"delta":{"\u0063ontent":"x"}}]}`, false, chunk{answer: true}, false},
	// Errors: an error object with choices (as OpenRouter sends one), vLLM's
	// error response as a chunk, LiteLLM's spaced one.
	{"error with choices", `{"error":{"code":502,"message":"x"},"choices":[{"delta":{"content":""},"finish_reason":"error"}]}`, false, chunk{failed: true}, false},
	{"object error", `{"object":"error","message":"x","code":500}`, false, chunk{failed: true}, false},
	{"spaced error", `{"error": {"message": "x"}}`, false, chunk{failed: true}, false},
	{"empty error", `{"error":"","choices":[]}`, false, chunk{}, false},
	// Usage goes to the full decode.
	{"usage", `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":1}}}`, false,
		chunk{usage: true, prompt: 5, completion: 2, reasonToken: 1}, false},
	{"spaced", `{"choices": [{"delta": {"reasoning_content": "x"}}]}`, false, chunk{reasoning: true}, false},

	// Not chunks.
	{"cut", `{"choices":[{"delta":{"content":"x`, false, chunk{}, true},
	{"array", `[1,2]`, false, chunk{}, true},
	{"raw tab in a string", "{\"choices\":[{\"text\":\"a\tb\"}]}", false, chunk{}, true},
	{"trailing bytes", `{"choices":[]}x`, false, chunk{}, true},
	{"usage count not a number", `{"usage":{"prompt_tokens":"5"}}`, false, chunk{}, true},
	{"choices not an array", `{"choices":{"delta":{"content":"x"}}}`, false, chunk{}, true},
}

// TestClassifyChunk checks chunkCases on both paths.
func TestClassifyChunk(t *testing.T) {
	for _, c := range chunkCases {
		t.Run(c.name, func(t *testing.T) {
			p := []byte(c.p)
			fast, sure := classifyFast(p, nil)
			if sure != c.sure {
				t.Errorf("fast path sure = %v, want %v", sure, c.sure)
			}
			full, err := classifyFull(p)
			if (err != nil) != c.wantErr {
				t.Fatalf("full decode error %v, want one: %v", err, c.wantErr)
			}
			if err == nil && full != c.want {
				t.Errorf("full decode %+v, want %+v", full, c.want)
			}
			if sure && fast != full {
				t.Errorf("fast path %+v, full decode %+v", fast, full)
			}
		})
	}
}

// memoStream is a stream of chunks whose heads trip a careless memo. It
// seeds FuzzStream too.
var memoStream = []string{
	`{"id":"a","choices":[{"delta":{"content":"x"}}],"choices":[]}`, // duplicate: not sure
	`{"id":"a","choices":[{"delta":{"content":"x"}}],"b":2}`,        // shares the first's prefix past choices
	`{"id":"a","choices":[{"delta":{"reasoning":"y"}}]}`,
	`{"id":"b","choices":[{"delta":{"content":""}}]}`,
}

// TestFastMemo checks that a remembered chunk head never carries tokens
// over: the head ends before the first "choices", so a chunk that repeats a
// longer prefix is walked again.
func TestFastMemo(t *testing.T) {
	var memo fastMemo
	for _, s := range memoStream {
		p := []byte(s)
		fast, sure := classifyFast(p, &memo)
		full, err := classifyFull(p)
		if err != nil {
			t.Fatal(err)
		}
		if sure && fast != full {
			t.Errorf("%s: with the memo %+v, full decode %+v", s, fast, full)
		}
	}
}

// TestFastShape checks the memo's chunk shapes: a token chunk shaped as
// the last one is classified by its string alone, as the walk would; any
// other chunk is walked, and the answer is always the one without a memo.
func TestFastShape(t *testing.T) {
	const h = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{`
	const tail = `},"logprobs":null,"finish_reason":null}]}`
	var shapeMemo fastMemo // carried from chunk to chunk, as in a stream
	for _, c := range []struct {
		chunk string
		hit   bool // classified by the shape
	}{
		{h + `"role":"assistant","content":""` + tail, false},
		{h + `"content":"so "` + tail, false},
		{h + `"content":"we "` + tail, true},
		{h + `"content":""` + tail, true},
		{h + `"content":"a\"b\\\u00e9},\"logprobs\":null"` + tail, true},
		{h + `"content":"bad\x"` + tail, false},
		{h + `"content":"x","content":"y"` + tail, false},
		{h + `"content":"x" ` + tail, false},
		{h + `"content":"x"` + tail + ` `, false},
		{h + `"content":"x"` + tail + `}`, false},
		{h + `"content":"` + "\x01" + `"` + tail, false},
		{h + `"content":"x` + tail, false},
		{h + `"content":"so "` + tail, true},
		{h + `"reasoning":"th"` + tail, false},
		{h + `"reasoning":"in"` + tail, true},
		{h + `"reasoning":""` + tail, true},
		{h + `"content":"x"},"logprobs":null,"finish_reason":"stop"}]}`, false},
		{h + `"content":"x","tool_calls":[{"index":0}]` + tail, false},
		{h + `"content":"y","tool_calls":[{"index":0}]` + tail, false}, // two token values: no shape kept
		{`{"id":"c1","choices":[{"text":"a"}]}`, false},
		{`{"id":"c1","choices":[{"text":"b"}]}`, true},
		{`{"id":"c1","choices":[{"text":""}]}`, true},
		{`{"id":"c1","choices":[{"text":null}]}`, false},
		{`{"id":"c1","choices":[{"text":"b"}],"usage":{"prompt_tokens":1}}`, false},
	} {
		p := []byte(c.chunk)
		_, hit := shapeMemo.sameShape(p)
		fast, sure := classifyFast(p, &shapeMemo)
		alone, aloneSure := classifyFast(p, nil)
		if hit != c.hit || fast != alone || sure != aloneSure {
			t.Errorf("%s: shape used %v (want %v); with the memo %+v (sure %v), alone %+v (sure %v)", c.chunk, hit, c.hit, fast, sure, alone, aloneSure)
		}
		if full, err := classifyFull(p); sure && (err != nil || full != fast) {
			t.Errorf("%s: fast path %+v, full decode %+v (%v)", c.chunk, fast, full, err)
		}
	}
}
