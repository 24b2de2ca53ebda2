package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// chunk is what one SSE data payload of a chat or text completion stream
// carried, as far as the load generator cares.
type chunk struct {
	// answer: some choice carried a non-empty content, text, refusal,
	// tool_calls or function_call delta.
	answer bool
	// reasoning: some choice carried a non-empty reasoning or
	// reasoning_content delta (vLLM's reasoning parsers write the first,
	// older vLLM, SGLang, llama.cpp and LiteLLM the second).
	reasoning bool
	// failed: the chunk is an error object, not a completion chunk.
	failed bool
	// usage: the chunk carried a usage object; the counts below are from it.
	usage                                   bool
	prompt, completion, cached, reasonToken int
}

// token reports whether the chunk carried a generated token of any kind.
func (c chunk) token() bool { return c.answer || c.reasoning }

// errNotJSON marks a payload that is not a JSON object at all.
var errNotJSON = errors.New("data is not a JSON object")

// The full decode: encoding/json into the few fields that matter, each
// token-bearing one judged by nonEmpty as it is read, so that any JSON type
// is accepted there and nothing is copied. It is the reference the fast path
// must agree with, and the path for every chunk the fast path is not sure of.
type (
	wireChunk struct {
		Object  objectName   `json:"object"`
		Choices []wireChoice `json:"choices"`
		Usage   wireUsage    `json:"usage"`
		Error   errorValue   `json:"error"`
	}
	wireChoice struct {
		Delta wireDelta `json:"delta"`
		Text  output    `json:"text"` // /v1/completions streams
	}
	wireDelta struct {
		Content          output `json:"content"`
		Refusal          output `json:"refusal"`
		ToolCalls        output `json:"tool_calls"`
		FunctionCall     output `json:"function_call"`
		Reasoning        output `json:"reasoning"`
		ReasoningContent output `json:"reasoning_content"`
	}
	wireUsage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		ReasoningTokens     int `json:"reasoning_tokens"` // SGLang writes it here
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
)

// output is a token-bearing field: whether its value carries output.
type output bool

// UnmarshalJSON judges the value by nonEmpty; a later duplicate key wins,
// as it would for any field.
func (o *output) UnmarshalJSON(b []byte) error {
	*o = output(nonEmpty(b))
	return nil
}

// errorValue is a chunk's "error": whether it names an error.
type errorValue bool

// UnmarshalJSON judges the value by isError.
func (e *errorValue) UnmarshalJSON(b []byte) error {
	*e = errorValue(isError(b))
	return nil
}

// classifyFull decodes one data payload with encoding/json. It fails when
// the payload is not valid JSON, not an object, or has one of the fields
// above with a type OpenAI's format does not allow (choices that is not an
// array, usage counts that are not integers).
func classifyFull(p []byte) (c chunk, err error) {
	var w wireChunk
	if err := json.Unmarshal(p, &w); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			return c, errNotJSON
		}
		if errors.As(err, &typeErr) {
			return c, fmt.Errorf("field %s is a JSON %s, OpenAI's streaming format has %s there", typeErr.Field, typeErr.Value, typeErr.Type)
		}
		return c, err
	}
	for i := range w.Choices {
		ch := &w.Choices[i]
		d := &ch.Delta
		if ch.Text || d.Content || d.Refusal || d.ToolCalls || d.FunctionCall {
			c.answer = true
		}
		if d.Reasoning || d.ReasoningContent {
			c.reasoning = true
		}
	}
	if bool(w.Object) || bool(w.Error) {
		c.failed = true
	}
	// A usage of all zeros (or null, or absent) says nothing: it is no usage.
	if u := w.Usage; u != (wireUsage{}) {
		c.usage = true
		c.prompt, c.completion, c.reasonToken = u.PromptTokens, u.CompletionTokens, u.ReasoningTokens
		c.cached = u.PromptTokensDetails.CachedTokens
		if r := u.CompletionTokensDetails.ReasoningTokens; r > 0 {
			c.reasonToken = r
		}
	}
	return c, nil
}

// objectName is a chunk's "object" as far as it matters: true when it is
// "error" (vLLM's ErrorResponse sent as a chunk).
type objectName bool

// UnmarshalJSON reads the value without allocating unless it is escaped.
func (o *objectName) UnmarshalJSON(b []byte) error {
	if bytes.IndexByte(b, '\\') < 0 {
		*o = string(b) == `"error"`
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return nil // not a string: not "error"
	}
	*o = s == "error"
	return nil
}

// nonEmpty reports whether a raw JSON value carries output: a string,
// array or object with something in it. null, "" , [] and {} carry none;
// nor do numbers and booleans, which no server sends there.
func nonEmpty(r []byte) bool {
	if len(r) < 2 {
		return false
	}
	switch r[0] {
	case '"':
		return len(r) > 2 // any escape decodes to at least one character
	case '[', '{':
		for _, b := range r[1:] {
			if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
				return b != ']' && b != '}'
			}
		}
	}
	return false
}

// isError reports whether a raw "error" value names an error: anything
// but absent, null, false and an empty string, array or object.
func isError(r []byte) bool {
	if len(r) == 0 || bytes.Equal(r, []byte("null")) || bytes.Equal(r, []byte("false")) {
		return false
	}
	switch r[0] {
	case '"', '[', '{':
		return nonEmpty(r)
	}
	return true
}
