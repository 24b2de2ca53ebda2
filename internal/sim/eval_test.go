package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/eval"
)

// TestEvalPhrases keeps the read-back phrases in step with the eval package.
func TestEvalPhrases(t *testing.T) {
	if factLead != eval.FactLead || questionLead != eval.QuestionLead {
		t.Errorf("sim's read-back phrases %q / %q differ from eval's %q / %q", factLead, questionLead, eval.FactLead, eval.QuestionLead)
	}
}

// TestBuiltInEvalsPass runs headroom's own built-in eval suites against the
// simulator: every tool call must validate and every code word come back.
func TestBuiltInEvalsPass(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 2000)
	tests := []struct {
		name        string
		stream      bool
		concurrency int
	}{
		// One request at a time, plain JSON answers (the pre-sweep smoke test).
		{"plain one at a time", false, 1},
		// Streamed answers assembled from tool-call deltas, four at a time.
		{"streamed concurrent", true, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := eval.NewClient(url, "tiny-model", eval.ClientOptions{Timeout: 30 * time.Second, Stream: tc.stream})
			defer client.Close()
			suites := eval.BuiltIn(tinyProfile().MaxModelLen)
			if len(suites) != 2 {
				t.Fatalf("BuiltIn gave %d suites, want tool calling and read-back", len(suites))
			}
			rep := eval.Run(context.Background(), client, suites, eval.Options{Concurrency: tc.concurrency, Seed: 3})
			for _, s := range rep.Suites {
				if s.Passed != s.Cases || s.Verdict != eval.Pass {
					var b strings.Builder
					_ = rep.WriteText(&b)
					t.Errorf("suite %s: %d of %d passed, verdict %s\n%s", s.Suite, s.Passed, s.Cases, s.Verdict, b.String())
				}
			}
		})
	}
}

// TestToolArgumentsFitSchemas draws arguments for schemas that use each
// keyword the generator handles and validates them with the eval package's
// checker, over many seeds.
func TestToolArgumentsFitSchemas(t *testing.T) {
	tests := []struct {
		name   string
		schema string
	}{
		// Enums of strings and numbers.
		{"enum", `{"type":"object","properties":{"mode":{"type":"string","enum":["a","b","c"]},"level":{"enum":[1,2,3]}},"required":["mode","level"],"additionalProperties":false}`},
		// Integer and number bounds, exclusive ones included.
		{"bounds", `{"type":"object","properties":{"n":{"type":"integer","minimum":5,"maximum":7},"x":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},"big":{"type":"integer","minimum":1,"maximum":600000}},"required":["n","x","big"]}`},
		// String lengths and a pattern.
		{"strings", `{"type":"object","properties":{"code":{"type":"string","minLength":12,"maxLength":14},"path":{"type":"string","pattern":"^/"},"short":{"type":"string","maxLength":2,"minLength":1}},"required":["code","path","short"],"additionalProperties":false}`},
		// Arrays with item schemas and bounds, nested objects, booleans.
		{"nested", `{"type":"object","properties":{"labels":{"type":"array","items":{"type":"string","minLength":2},"minItems":2,"maxItems":4},"opts":{"type":"object","properties":{"on":{"type":"boolean"},"depth":{"type":"integer","minimum":0}},"required":["on","depth"],"additionalProperties":false}},"required":["labels","opts"]}`},
		// A type list with null, and a property with no type at all.
		{"type lists", `{"type":"object","properties":{"maybe":{"type":["null","integer"],"maximum":3},"anything":{}},"required":["maybe","anything"]}`},
		// No parameters schema: any object.
		{"empty", `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool := eval.Tool{Type: "function", Function: eval.Function{Name: "f", Parameters: json.RawMessage(tc.schema)}}
			ts, err := eval.NewToolSet([]eval.Tool{tool})
			if err != nil {
				t.Fatal(err)
			}
			check, err := ts.Expect("f")
			if err != nil {
				t.Fatal(err)
			}
			s := &Sim{}
			body := &chatRequest{Tools: []toolDef{{Type: "function"}}, Messages: []chatMessage{{Role: "user", Content: json.RawMessage(`"Use the f tool on /repo/main.go."`)}}}
			body.Tools[0].Function.Name = "f"
			body.Tools[0].Function.Parameters = json.RawMessage(tc.schema)
			for seed := range uint64(200) {
				rep, err := s.planReply(body, mix64(seed))
				if err != nil {
					t.Fatal(err)
				}
				a := eval.Answer{ToolCalls: []eval.ToolCall{{Function: eval.FunctionCall{Name: rep.tool, Arguments: rep.args}}}}
				if m := check.Check(a); m != nil {
					t.Fatalf("seed %d: %v", seed, m)
				}
			}
		})
	}
}

// TestToolCallWire checks the shape of tool calls on the wire, streamed and
// not, and that tool_choice picks or suppresses the call.
func TestToolCallWire(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 1000)
	tools := `[{"type":"function","function":{"name":"Read","parameters":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}},{"type":"function","function":{"name":"Bash","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}]`
	tests := []struct {
		name     string
		prompt   string
		choice   string // raw JSON, or empty
		stream   bool
		wantTool string // "" when no call is wanted
	}{
		// The prompt names the tool.
		{"named plain", "Use the Bash tool to list files", "", false, "Bash"},
		// The same, streamed as tool-call deltas.
		{"named streamed", "Use the Bash tool to list files", `"auto"`, true, "Bash"},
		// No tool named: the first one.
		{"first tool", "look around please", `"required"`, false, "Read"},
		// tool_choice names a function.
		{"forced", "Use the Bash tool to list files", `{"type":"function","function":{"name":"Read"}}`, true, "Read"},
		// tool_choice none: a text answer.
		{"none", "Use the Bash tool to list files", `"none"`, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"model":"tiny-model","max_tokens":200,"stream":%v,"tools":%s,"messages":[{"role":"user","content":%q}]`, tc.stream, tools, tc.prompt)
			if tc.choice != "" {
				body += `,"tool_choice":` + tc.choice
			}
			body += "}"
			client := eval.NewClient(url, "tiny-model", eval.ClientOptions{Stream: tc.stream})
			defer client.Close()
			// Send it raw, then read it back with the eval client's parser.
			var req struct {
				Messages   []eval.Message `json:"messages"`
				Tools      []eval.Tool    `json:"tools"`
				ToolChoice json.RawMessage
			}
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			if tc.choice != "" && tc.choice[0] == '{' {
				// The eval client sends only string choices; check the named
				// form over raw HTTP.
				resp := post(t, context.Background(), url+"/v1/chat/completions", []byte(strings.Replace(body, `"stream":true`, `"stream":false`, 1)))
				defer resp.Body.Close()
				var out struct {
					Choices []struct {
						Message struct {
							ToolCalls []eval.ToolCall `json:"tool_calls"`
						} `json:"message"`
						FinishReason string `json:"finish_reason"`
					} `json:"choices"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
					t.Fatal(err)
				}
				if c := out.Choices[0]; len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != tc.wantTool || c.FinishReason != "tool_calls" {
					t.Errorf("answer = %+v, want one call to %s", c, tc.wantTool)
				}
				return
			}
			choice := ""
			if tc.choice != "" {
				_ = json.Unmarshal([]byte(tc.choice), &choice)
			}
			a, err := client.Complete(context.Background(), eval.Request{Messages: req.Messages, Tools: req.Tools, ToolChoice: choice, MaxTokens: 200})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantTool == "" {
				if len(a.ToolCalls) != 0 || a.FinishReason != "length" || a.Content == "" {
					t.Errorf("tool_choice none: answer %+v, want text and no call", a)
				}
				return
			}
			if len(a.ToolCalls) != 1 || a.FinishReason != "tool_calls" {
				t.Fatalf("answer %+v, want one tool call and finish_reason tool_calls", a)
			}
			c := a.ToolCalls[0]
			if c.Function.Name != tc.wantTool || c.Type != "function" || !strings.HasPrefix(c.ID, "chatcmpl-tool-") || c.Malformed != "" {
				t.Errorf("call = %+v, want a well-formed call to %s", c, tc.wantTool)
			}
			var args map[string]any
			if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
				t.Errorf("arguments %q are not JSON: %v", c.Function.Arguments, err)
			}
			if a.OutputTokens < 2 {
				t.Errorf("a tool call counted %d output tokens, want the name and the argument fragments", a.OutputTokens)
			}
		})
	}
}

// TestReadBackAnswer: the code word comes back as the whole answer with
// finish_reason stop, and a prompt with the fact but no question gets the
// ordinary vocabulary.
func TestReadBackAnswer(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 1000)
	client := eval.NewClient(url, "tiny-model", eval.ClientOptions{})
	defer client.Close()
	filler := words("f", 0, 100)
	tests := []struct {
		name   string
		prompt string
		want   string // the exact answer, or "" for the vocabulary
	}{
		// The fact mid-text and the question at the end.
		{"planted", filler + " " + eval.FactLead + "teal-comet-0042. Remember it. " + filler + "\n\n" + eval.QuestionLead + " stated in the text above?", "teal-comet-0042"},
		// The fact without the question: an ordinary answer.
		{"no question", filler + " " + eval.FactLead + "teal-comet-0042. Remember it.", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := client.Complete(context.Background(), eval.Request{Messages: []eval.Message{{Role: "user", Content: tc.prompt}}, MaxTokens: 8})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if a.FinishReason != "length" || len(strings.Fields(a.Content)) != 8 || strings.Contains(a.Content, "teal") {
					t.Errorf("answer %+v, want 8 vocabulary words", a)
				}
				return
			}
			if a.Content != tc.want || a.FinishReason != "stop" || a.OutputTokens != 1 {
				t.Errorf("answer %+v, want exactly %q, finish stop, 1 token", a, tc.want)
			}
		})
	}
}
