package eval

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
)

// agentTools are the tools a coding agent offers on every turn, with schemas
// shaped like the ones agents send (required fields, enums, bounds, no extra
// properties).
var agentTools = []Tool{
	fn("Read", "Reads a file from the local filesystem. file_path must be absolute. Reads the whole file unless offset and limit say which lines.", `{
		"type": "object",
		"properties": {
			"file_path": {"type": "string", "description": "The absolute path of the file to read", "pattern": "^/"},
			"offset": {"type": "integer", "minimum": 1, "description": "The line number to start reading from"},
			"limit": {"type": "integer", "minimum": 1, "description": "The number of lines to read"}
		},
		"required": ["file_path"],
		"additionalProperties": false
	}`),
	fn("Edit", "Replaces exact text in a file. old_string must occur in the file exactly once unless replace_all is true.", `{
		"type": "object",
		"properties": {
			"file_path": {"type": "string", "description": "The absolute path of the file to change", "pattern": "^/"},
			"old_string": {"type": "string", "minLength": 1, "description": "The text to replace"},
			"new_string": {"type": "string", "description": "The text to put in its place"},
			"replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence"}
		},
		"required": ["file_path", "old_string", "new_string"],
		"additionalProperties": false
	}`),
	fn("Write", "Writes a file, replacing it if it exists.", `{
		"type": "object",
		"properties": {
			"file_path": {"type": "string", "description": "The absolute path of the file to write", "pattern": "^/"},
			"content": {"type": "string", "description": "The whole content of the file"}
		},
		"required": ["file_path", "content"],
		"additionalProperties": false
	}`),
	fn("Bash", "Runs a shell command in the repository and returns its output.", `{
		"type": "object",
		"properties": {
			"command": {"type": "string", "minLength": 1, "description": "The command to run"},
			"timeout": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds"},
			"description": {"type": "string", "description": "What the command does, in 5 to 10 words"}
		},
		"required": ["command"],
		"additionalProperties": false
	}`),
	fn("Grep", "Searches file contents with a regular expression.", `{
		"type": "object",
		"properties": {
			"pattern": {"type": "string", "minLength": 1, "description": "The regular expression to search for"},
			"path": {"type": "string", "description": "The file or directory to search in"},
			"glob": {"type": "string", "description": "Only search files matching this glob, e.g. *.go"},
			"output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "description": "What to show"},
			"-i": {"type": "boolean", "description": "Case-insensitive search"}
		},
		"required": ["pattern"],
		"additionalProperties": false
	}`),
	fn("Glob", "Lists files whose paths match a glob pattern.", `{
		"type": "object",
		"properties": {
			"pattern": {"type": "string", "minLength": 1, "description": "The glob pattern, e.g. **/*_test.go"},
			"path": {"type": "string", "description": "The directory to search in"}
		},
		"required": ["pattern"],
		"additionalProperties": false
	}`),
}

func fn(name, desc, params string) Tool {
	var compact json.RawMessage
	if err := json.Unmarshal([]byte(params), &compact); err != nil {
		panic(fmt.Sprintf("built-in tool %s: schema is not JSON: %v", name, err)) // a programming error, caught by the tests
	}
	b, _ := json.Marshal(compact)
	return Tool{Type: "function", Function: Function{Name: name, Description: desc, Parameters: b}}
}

// AgentTools returns the tools the built-in tool-calling suite offers.
func AgentTools() []Tool { return append([]Tool(nil), agentTools...) }

var (
	agentToolSetOnce sync.Once
	agentToolSet     *ToolSet
)

// builtInToolSet compiles the built-in tool schemas once per process.
func builtInToolSet() *ToolSet {
	agentToolSetOnce.Do(func() {
		ts, err := NewToolSet(agentTools)
		if err != nil {
			panic("built-in tool schemas: " + err.Error()) // a programming error, caught by the tests
		}
		agentToolSet = ts
	})
	return agentToolSet
}

// agentSystem is the system prompt of every tool-calling case, like a coding
// agent's.
const agentSystem = "You are a coding agent working in the Go repository at /repo. Act only through the tools you are given. Call exactly one tool per turn, with arguments that follow its schema."

// toolTask is one kind of tool-calling task: the tool it needs and its prompt
// built from the case's random picks.
type toolTask struct {
	tool   string
	prompt func(r *rand.Rand) string
}

var (
	pkgs   = []string{"server", "store", "auth", "queue", "billing", "render", "config", "sched"}
	files  = []string{"handler.go", "client.go", "cache.go", "retry.go", "limits.go", "parse.go"}
	idents = []string{"retryBudget", "ParseConfig", "flushQueue", "tokenBucket", "NewSession", "maxBackoff"}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

var toolTasks = []toolTask{
	{"Read", func(r *rand.Rand) string {
		return fmt.Sprintf("Use the Read tool to open /repo/internal/%s/%s so we can see how errors are handled there.", pick(r, pkgs), pick(r, files))
	}},
	{"Read", func(r *rand.Rand) string {
		a := 20 + r.IntN(200)
		return fmt.Sprintf("Use the Read tool to read lines %d to %d of /repo/internal/%s/%s.", a, a+40, pick(r, pkgs), pick(r, files))
	}},
	{"Edit", func(r *rand.Rand) string {
		p, f, id := pick(r, pkgs), pick(r, files), pick(r, idents)
		return fmt.Sprintf("Use the Edit tool to rename %s to %sV2 in /repo/internal/%s/%s. The line to change is exactly:\nfunc %s(ctx context.Context) error {", id, id, p, f, id)
	}},
	{"Write", func(r *rand.Rand) string {
		p := pick(r, pkgs)
		return fmt.Sprintf("Use the Write tool to create /repo/internal/%s/doc.go holding one line: package %s", p, p)
	}},
	{"Bash", func(r *rand.Rand) string {
		return fmt.Sprintf("Use the Bash tool to run the tests of the %s package: go test ./internal/%s/...", pick(r, pkgs), pick(r, pkgs))
	}},
	{"Grep", func(r *rand.Rand) string {
		return fmt.Sprintf("Use the Grep tool to find the files under /repo/internal that mention %s; list only the file names.", pick(r, idents))
	}},
	{"Glob", func(r *rand.Rand) string {
		return fmt.Sprintf("Use the Glob tool to list every _test.go file under /repo/internal/%s.", pick(r, pkgs))
	}},
}

// DefaultToolCases is the size of the built-in tool-calling suite: enough
// that an engine breaking every tool call fails confidently, and that one
// breaking a third of them usually does too.
const DefaultToolCases = 42

// ToolSuite is the built-in tool-calling suite: coding-agent tasks that each
// name the tool to use, sent with the six agent tools (Read, Edit, Write,
// Bash, Grep, Glob) as `tools` with tool_choice "auto". A case passes when the
// answer calls the named tool and every call's arguments validate against the
// tool's schema. Prompts name the tool so that the suite checks the serving
// path (tool-call parsing, constrained decoding under load), not the model's
// judgement.
type ToolSuite struct {
	N         int // cases; 0 means DefaultToolCases
	MaxTokens int // cap per request; 0 means 1024
}

// NewToolSuite returns the tool-calling suite with n cases (0: the default).
func NewToolSuite(n int) ToolSuite { return ToolSuite{N: n} }

// Name implements Suite.
func (ToolSuite) Name() string { return "tool_calling" }

// Cases implements Suite: N cases cycling through the task kinds, with the
// files, packages and names in each drawn from seed.
func (s ToolSuite) Cases(seed uint64) []Case {
	n := s.N
	if n <= 0 {
		n = DefaultToolCases
	}
	mt := s.MaxTokens
	if mt <= 0 {
		mt = 1024
	}
	ts := builtInToolSet()
	r := rand.New(rand.NewPCG(seed, 0x7001ca11))
	out := make([]Case, n)
	for i := range out {
		t := toolTasks[i%len(toolTasks)]
		check, err := ts.Expect(t.tool)
		if err != nil {
			panic(err) // the task table names a tool that is not offered: a programming error
		}
		out[i] = Case{
			ID:    fmt.Sprintf("tool-%03d-%s", i, t.tool),
			Suite: s.Name(),
			Request: Request{
				Messages:   []Message{{Role: "system", Content: agentSystem}, {Role: "user", Content: t.prompt(r)}},
				Tools:      ts.Tools,
				ToolChoice: "auto",
				MaxTokens:  mt,
			},
			Check: check,
		}
	}
	return out
}
