// Package eval runs the mini evals that check a recipe answers correctly, not
// just fast: tool calls checked against their JSON Schema, long-context
// read-back of a planted fact, and custom suites from JSONL. Each suite gets a
// pass rate with a binomial interval and blocks the recipe only on a confident
// fail (the interval's upper bound below the suite's threshold).
//
// # Use by the rest of the rig
//
// Before the sweep (the "mini evals" phase, and `headroom eval -f FILE`):
//
//	client := eval.NewClient(baseURL, model, eval.ClientOptions{Timeout: 2 * time.Minute})
//	suites := eval.BuiltIn(maxModelLen)          // tool calling + read-back
//	custom, err := eval.LoadCustom("evals.jsonl") // optional, errors name file:line:field
//	rep := eval.Run(ctx, client, append(suites, custom), eval.Options{Concurrency: 1})
//	rep.WriteText(stdout)                         // and JSON into the run directory
//	if rep.Blocked() { ... the recipe fails its evals ... }
//
// During the sweep (correctness under load), a set share of each step's
// requests are eval requests:
//
//	mixer, err := eval.NewMixer(0.05, seed, eval.NewToolSuite(0))
//	tally := eval.NewTally()
//	// in each lane, before sending a trace turn:
//	if mixer.Take() {
//		res := eval.RunCase(ctx, client, mixer.Next())
//		tally.Add(step, res)
//	}
//	// when judging the step:
//	part := tally.Step(step).Part(maxMismatchShare, 0.95) // a verdict.Part for the step
//
// See docs/evals.md for the suites, the confident-fail rule and the JSONL format.
package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Message is one chat message of an eval request, in OpenAI's shape.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// Tool is one tool offered to the model, in OpenAI's `tools` format.
type Tool struct {
	Type     string   `json:"type"` // "function"
	Function Function `json:"function"`
}

// Function describes a callable function: its name and the JSON Schema of its
// arguments.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ToolCall is one tool call in an answer.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
	// Malformed says what was wrong with the call's shape on the wire (for
	// example arguments sent as a JSON object instead of a string); empty
	// when the shape was right.
	Malformed string `json:"malformed,omitempty"`
}

// FunctionCall is the function a tool call names and its arguments, a JSON
// text in a string as OpenAI sends it.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Request is one eval request. MaxTokens is required: every eval request
// carries a cap.
type Request struct {
	Messages   []Message `json:"messages"`
	Tools      []Tool    `json:"tools,omitempty"`
	ToolChoice string    `json:"tool_choice,omitempty"` // "auto", "required", "none"; empty leaves the server's default
	MaxTokens  int       `json:"max_tokens"`
}

// Answer is what the server returned for one eval request.
type Answer struct {
	Status       int           `json:"status"`
	Content      string        `json:"content,omitempty"`
	ToolCalls    []ToolCall    `json:"tool_calls,omitempty"`
	FinishReason string        `json:"finish_reason,omitempty"`
	PromptTokens int           `json:"prompt_tokens,omitempty"`
	OutputTokens int           `json:"output_tokens,omitempty"`
	Elapsed      time.Duration `json:"elapsed_ns"`
}

// Checker decides whether an answer passes. It returns nil on a pass and a
// *Mismatch saying why otherwise.
type Checker interface {
	Check(a Answer) *Mismatch
}

// Case is one eval item: the request to send and the check of its answer.
type Case struct {
	ID      string
	Suite   string // set by the suite; Run and Mixer fill it in when empty
	Request Request
	Check   Checker
}

// Suite is a named set of cases. Cases is deterministic for a seed.
type Suite interface {
	Name() string
	Cases(seed uint64) []Case
}

// Failure classes. The first group are answers that came back wrong, the
// second requests that got no usable answer.
const (
	ClassSchema      = "schema_mismatch" // a tool call's arguments are not JSON or do not match the tool's schema; or a JSON answer does not match its schema
	ClassUnknownTool = "unknown_tool"    // a tool call names a tool the request did not offer
	ClassNoTool      = "no_tool"         // a tool call was expected and none came
	ClassWrongTool   = "wrong_tool"      // well-formed calls, none to the expected tool
	ClassWrongAnswer = "wrong_answer"    // the text answer did not match

	ClassRefused     = "refused"      // HTTP 4xx
	ClassServer      = "server_error" // HTTP 5xx or an error in the stream
	ClassTimeout     = "timeout"      // the request's deadline passed
	ClassAborted     = "aborted"      // the caller cancelled the request
	ClassConnect     = "connect"      // the request never reached the server
	ClassBadResponse = "bad_response" // a 200 whose body could not be read as a chat completion
	ClassBadRequest  = "bad_request"  // the case itself was invalid (e.g. no max_tokens); nothing was sent
)

// Malformed reports whether a failure class means the answer's tool call did
// not match its schema: arguments not JSON or not valid, a tool that was not
// offered, or no call at all where one was asked for (a broken tool-call
// parser often leaves the call as plain text). These are what the under-load
// bar part counts.
func Malformed(class string) bool {
	return class == ClassSchema || class == ClassUnknownTool || class == ClassNoTool
}

// Mismatch says why an answer failed its check.
type Mismatch struct {
	Class  string
	Reason string
}

func (m *Mismatch) Error() string { return m.Class + ": " + m.Reason }

func mismatch(class, format string, args ...any) *Mismatch {
	return &Mismatch{Class: class, Reason: fmt.Sprintf(format, args...)}
}

// Completer sends one eval request and returns the answer. *Client is one;
// tests and the rig may bring their own.
type Completer interface {
	Complete(ctx context.Context, r Request) (Answer, error)
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	Suite    string        `json:"suite"`
	Case     string        `json:"case"`
	Pass     bool          `json:"pass"`
	Class    string        `json:"class,omitempty"` // failure class, empty on a pass
	Reason   string        `json:"reason,omitempty"`
	ToolCase bool          `json:"tool_case,omitempty"` // the case offered tools and expected a call
	Answered bool          `json:"answered"`            // a 200 with a readable answer came back
	Elapsed  time.Duration `json:"elapsed_ns"`
}

// toolExpecter is implemented by checkers that expect a tool call, so that
// results can say which cases were tool cases.
type toolExpecter interface{ expectsTool() bool }

// Judge checks one answer (or the error that replaced it) against its case.
func Judge(c Case, a Answer, err error) CaseResult {
	r := CaseResult{Suite: c.Suite, Case: c.ID, Elapsed: a.Elapsed}
	if te, ok := c.Check.(toolExpecter); ok {
		r.ToolCase = te.expectsTool()
	}
	if err != nil {
		r.Class, r.Reason = ClassServer, err.Error()
		if re, ok := err.(*RequestError); ok {
			r.Class = re.Class
		}
		return r
	}
	r.Answered = true
	if c.Check == nil {
		r.Class, r.Reason = ClassBadRequest, "the case has no check"
		return r
	}
	if m := c.Check.Check(a); m != nil {
		r.Class, r.Reason = m.Class, m.Reason
		return r
	}
	r.Pass = true
	return r
}

// RunCase sends one case with the completer and judges its answer.
func RunCase(ctx context.Context, c Completer, cs Case) CaseResult {
	a, err := c.Complete(ctx, cs.Request)
	return Judge(cs, a, err)
}
