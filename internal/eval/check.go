package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileSchema compiles one JSON Schema held in memory. References to other
// documents are refused: an eval must not reach for files or the network.
func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no file or network references
	url := "mem:///" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("the schema cannot be added: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("the schema does not compile: %w", err)
	}
	return s, nil
}

// validate checks a JSON text against a compiled schema.
func validate(s *jsonschema.Schema, text string) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if err := s.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return errors.New(flatten(ve.Error()))
		}
		return err
	}
	return nil
}

// flatten puts a multi-line validation message on one line and bounds it.
func flatten(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// clip bounds a quoted piece of an answer in a failure reason.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// ToolSet is a set of tools with their parameter schemas compiled once.
type ToolSet struct {
	Tools   []Tool
	schemas map[string]*jsonschema.Schema
}

// NewToolSet compiles the parameters schema of every tool. The error names
// the tool (by index and name) whose schema is wrong.
func NewToolSet(tools []Tool) (*ToolSet, error) {
	ts := &ToolSet{Tools: tools, schemas: make(map[string]*jsonschema.Schema, len(tools))}
	for i, t := range tools {
		if t.Type != "function" {
			return nil, fmt.Errorf("tools[%d].type is %q: only \"function\" tools are supported", i, t.Type)
		}
		if t.Function.Name == "" {
			return nil, fmt.Errorf("tools[%d].function.name is empty: give every tool a name", i)
		}
		if _, dup := ts.schemas[t.Function.Name]; dup {
			return nil, fmt.Errorf("tools[%d].function.name %q is offered twice: tool names must be unique", i, t.Function.Name)
		}
		s, err := compileSchema(fmt.Sprintf("tool-%d", i), t.Function.Parameters)
		if err != nil {
			return nil, fmt.Errorf("tools[%d].function.parameters (%s): %w", i, t.Function.Name, err)
		}
		ts.schemas[t.Function.Name] = s
	}
	return ts, nil
}

// Expect returns the check that the answer calls the named tool with valid
// arguments. The name must be one of the set's tools.
func (ts *ToolSet) Expect(name string) (*ToolCheck, error) {
	if _, ok := ts.schemas[name]; !ok {
		return nil, fmt.Errorf("expected tool %q is not among the offered tools", name)
	}
	return &ToolCheck{Tool: name, set: ts}, nil
}

// ToolCheck passes an answer that calls Tool with arguments valid against its
// schema, and whose every tool call is well formed: it names an offered tool
// and its arguments, a JSON string, validate against that tool's schema.
type ToolCheck struct {
	Tool string
	set  *ToolSet
}

func (c *ToolCheck) expectsTool() bool { return true }

// Check implements Checker.
func (c *ToolCheck) Check(a Answer) *Mismatch {
	if len(a.ToolCalls) == 0 {
		return mismatch(ClassNoTool, "expected a call to %s, got no tool call (finish_reason %q, content %q)", c.Tool, a.FinishReason, clip(a.Content, 120))
	}
	called := false
	for i, tc := range a.ToolCalls {
		s, ok := c.set.schemas[tc.Function.Name]
		if !ok {
			return mismatch(ClassUnknownTool, "tool_calls[%d] names %q, which was not offered", i, tc.Function.Name)
		}
		if tc.Malformed != "" {
			return mismatch(ClassSchema, "tool_calls[%d] (%s): %s", i, tc.Function.Name, tc.Malformed)
		}
		if err := validate(s, tc.Function.Arguments); err != nil {
			return mismatch(ClassSchema, "tool_calls[%d] (%s) arguments %s: %v", i, tc.Function.Name, clip(tc.Function.Arguments, 120), err)
		}
		called = called || tc.Function.Name == c.Tool
	}
	if !called {
		names := make([]string, len(a.ToolCalls))
		for i, tc := range a.ToolCalls {
			names[i] = tc.Function.Name
		}
		return mismatch(ClassWrongTool, "expected a call to %s, got %s", c.Tool, strings.Join(names, ", "))
	}
	return nil
}

// ExactCheck passes an answer whose text, trimmed of surrounding white space,
// is exactly Want.
type ExactCheck struct{ Want string }

// Check implements Checker.
func (c ExactCheck) Check(a Answer) *Mismatch {
	if got := strings.TrimSpace(a.Content); got != c.Want {
		return mismatch(ClassWrongAnswer, "expected exactly %q, got %q", c.Want, clip(got, 120))
	}
	return nil
}

// ContainsCheck passes an answer whose text holds Want verbatim.
type ContainsCheck struct{ Want string }

// Check implements Checker.
func (c ContainsCheck) Check(a Answer) *Mismatch {
	if !strings.Contains(a.Content, c.Want) {
		return mismatch(ClassWrongAnswer, "expected the answer to hold %q, got %q", c.Want, clip(strings.TrimSpace(a.Content), 120))
	}
	return nil
}

// RegexCheck passes an answer whose text matches Re anywhere (anchor the
// pattern to match it whole).
type RegexCheck struct{ Re *regexp.Regexp }

// Check implements Checker.
func (c RegexCheck) Check(a Answer) *Mismatch {
	if !c.Re.MatchString(a.Content) {
		return mismatch(ClassWrongAnswer, "expected a match for /%s/, got %q", c.Re, clip(strings.TrimSpace(a.Content), 120))
	}
	return nil
}

// SchemaCheck passes an answer whose text is JSON valid against a schema. A
// single surrounding Markdown code fence is allowed.
type SchemaCheck struct {
	schema *jsonschema.Schema
}

// NewSchemaCheck compiles the schema an answer must match.
func NewSchemaCheck(raw json.RawMessage) (*SchemaCheck, error) {
	s, err := compileSchema("answer", raw)
	if err != nil {
		return nil, err
	}
	return &SchemaCheck{schema: s}, nil
}

// Check implements Checker.
func (c *SchemaCheck) Check(a Answer) *Mismatch {
	text := unfence(a.Content)
	if err := validate(c.schema, text); err != nil {
		return mismatch(ClassSchema, "answer %q: %v", clip(text, 120), err)
	}
	return nil
}

// unfence strips white space and one ```lang ... ``` fence around a text.
func unfence(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	s = strings.TrimSuffix(s[3:], "```")
	if i := strings.IndexByte(s, '\n'); i >= 0 && !strings.ContainsAny(s[:i], "{[\"") {
		s = s[i+1:] // the language tag line
	}
	return strings.TrimSpace(s)
}
