package eval

import (
	"strings"
	"testing"
)

func TestParseCustomErrorsNameFileLineField(t *testing.T) {
	const tool = `"tools": [{"type": "function", "function": {"name": "T", "parameters": {"type": "object"}}}]`
	tests := []struct {
		name string
		body string
		want string // the error must hold this
	}{
		{"a missing id", `{"prompt": "hi", "expect": {"exact": "x"}}`, "f.jsonl:1:id: missing"},
		{"a line that is not JSON, after a comment and a blank line", "# c\n\n{nope", "f.jsonl:3:: not a valid case"},
		{"an unknown field", `{"id": "a", "prompt": "hi", "answer": "x", "expect": {"exact": "x"}}`, "f.jsonl:1:answer: unknown field"},
		{"a field of the wrong type", `{"id": "a", "prompt": "hi", "expect": {"exact": "x"}, "max_tokens": "many"}`, "f.jsonl:1:max_tokens: not a valid case"},
		{"both prompt and messages", `{"id": "a", "prompt": "hi", "messages": [{"role": "user", "content": "hi"}], "expect": {"exact": "x"}}`, "f.jsonl:1:prompt: give prompt or messages, not both"},
		{"neither prompt nor messages", `{"id": "a", "expect": {"exact": "x"}}`, "f.jsonl:1:prompt: missing"},
		{"a bad role", `{"id": "a", "messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}], "expect": {"exact": "x"}}`, "f.jsonl:1:messages[1].role"},
		{"no expectation", `{"id": "a", "prompt": "hi"}`, "f.jsonl:1:expect: missing"},
		{"two expectations", `{"id": "a", "prompt": "hi", "expect": {"exact": "x", "regex": "x"}}`, "f.jsonl:1:expect: 2 expectations"},
		{"a regex that does not compile", `{"id": "a", "prompt": "hi", "expect": {"regex": "(("}}`, "f.jsonl:1:expect.regex: does not compile"},
		{"a schema that does not compile", `{"id": "a", "prompt": "hi", "expect": {"schema": {"type": 7}}}`, "f.jsonl:1:expect.schema: the schema does not compile"},
		{"a schema that reaches for a file", `{"id": "a", "prompt": "hi", "expect": {"schema": {"$ref": "file:///etc/passwd"}}}`, "f.jsonl:1:expect.schema"},
		{"a tool expected but none offered", `{"id": "a", "prompt": "hi", "expect": {"tool": "T"}}`, "f.jsonl:1:expect.tool: no tools offered"},
		{"a tool expected that is not offered", `{"id": "a", "prompt": "hi", ` + tool + `, "expect": {"tool": "U"}}`, "f.jsonl:1:expect.tool: expected tool \"U\""},
		{"a tool whose parameters do not compile", `{"id": "a", "prompt": "hi", "tools": [{"type": "function", "function": {"name": "T", "parameters": {"type": "thing"}}}], "expect": {"tool": "T"}}`, "f.jsonl:1:tools[0].function.parameters"},
		{"a tool without a name", `{"id": "a", "prompt": "hi", "tools": [{"type": "function", "function": {}}], "expect": {"exact": "x"}}`, "f.jsonl:1:tools[0].function.name"},
		{"max_tokens below 1", `{"id": "a", "prompt": "hi", "expect": {"exact": "x"}, "max_tokens": 0}`, "f.jsonl:1:max_tokens: 0"},
		{"a repeated id names both lines", `{"id": "a", "prompt": "hi", "expect": {"exact": "x"}}` + "\n" + `{"id": "a", "prompt": "ho", "expect": {"exact": "y"}}`, "f.jsonl:2:id: \"a\" was already used on line 1"},
		{"an empty file", "# only a comment\n", "f.jsonl: no cases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCustom("f", "f.jsonl", strings.NewReader(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to hold %q", err, tt.want)
			}
		})
	}
}

func TestParseCustomCases(t *testing.T) {
	body := `{"id": "p", "prompt": "Say ok.", "expect": {"exact": "ok"}}
{"id": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say ok."}], "expect": {"regex": "(?i)^ok\\.?$"}, "max_tokens": 8}
{"id": "s", "prompt": "JSON please", "expect": {"schema": {"type": "object", "required": ["a"]}}}
{"id": "t", "prompt": "Call T", "tools": [{"type": "function", "function": {"name": "T", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}], "expect": {"tool": "T"}}`
	s, err := ParseCustom("mine", "mine.jsonl", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	cases := s.Cases(0)
	tests := []struct {
		name      string
		i         int
		answer    Answer
		pass      bool
		maxTokens int
	}{
		{"a prompt becomes one user message; exact ignores surrounding space", 0, Answer{Content: " ok\n"}, true, DefaultCustomMaxTokens},
		{"exact is exact", 0, Answer{Content: "ok."}, false, DefaultCustomMaxTokens},
		{"regex matches", 1, Answer{Content: "OK."}, true, 8},
		{"schema accepts fenced JSON", 2, Answer{Content: "```json\n{\"a\": 1}\n```"}, true, DefaultCustomMaxTokens},
		{"schema rejects JSON missing a field", 2, Answer{Content: `{"b": 1}`}, false, DefaultCustomMaxTokens},
		{"schema rejects prose", 2, Answer{Content: "sure!"}, false, DefaultCustomMaxTokens},
		{"tool passes a valid call", 3, Answer{ToolCalls: []ToolCall{{Function: FunctionCall{Name: "T", Arguments: `{"n": 3}`}}}}, true, DefaultCustomMaxTokens},
		{"tool rejects a wrong type", 3, Answer{ToolCalls: []ToolCall{{Function: FunctionCall{Name: "T", Arguments: `{"n": "3"}`}}}}, false, DefaultCustomMaxTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cases[tt.i]
			if c.Suite != "mine" || c.Request.MaxTokens != tt.maxTokens {
				t.Fatalf("case %s: suite %q max_tokens %d", c.ID, c.Suite, c.Request.MaxTokens)
			}
			r := Judge(c, tt.answer, nil)
			if r.Pass != tt.pass {
				t.Fatalf("pass %v (%s: %s), want %v", r.Pass, r.Class, r.Reason, tt.pass)
			}
		})
	}
	if len(cases[1].Request.Messages) != 2 || cases[3].Request.ToolChoice != "auto" {
		t.Errorf("messages or tool_choice not carried: %+v", cases[1].Request)
	}
}
