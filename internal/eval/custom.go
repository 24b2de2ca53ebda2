package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// DefaultCustomMaxTokens caps a custom case that gives no max_tokens.
const DefaultCustomMaxTokens = 512

// CustomSuite is a suite read from a JSONL file, one case a line. Its cases
// come in file order whatever the seed.
type CustomSuite struct {
	name  string
	cases []Case
}

// Name implements Suite: the file's base name without its extension.
func (s *CustomSuite) Name() string { return s.name }

// Cases implements Suite.
func (s *CustomSuite) Cases(uint64) []Case { return s.cases }

// customLine is one line of a custom suite file.
type customLine struct {
	ID        string        `json:"id"`
	Prompt    *string       `json:"prompt"`
	Messages  []Message     `json:"messages"`
	Tools     []Tool        `json:"tools"`
	Expect    *customExpect `json:"expect"`
	MaxTokens *int          `json:"max_tokens"`
}

type customExpect struct {
	Exact  *string          `json:"exact"`
	Regex  *string          `json:"regex"`
	Schema *json.RawMessage `json:"schema"`
	Tool   *string          `json:"tool"`
}

// LoadCustom reads a custom suite from a JSONL file. Each line is
//
//	{"id": "...", "prompt": "..." | "messages": [...], "tools": [...]?,
//	 "expect": {"exact": "..."} | {"regex": "..."} | {"schema": {...}} | {"tool": "Name"},
//	 "max_tokens": N?}
//
// Blank lines and lines starting with # or // are skipped. Every schema is
// compiled here, once. Errors name file:line:field.
func LoadCustom(path string) (*CustomSuite, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("custom eval suite: %w", err)
	}
	defer f.Close()
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return ParseCustom(name, path, f)
}

// ParseCustom reads a custom suite named name from r; file is the name
// errors give for the source.
func ParseCustom(name, file string, r io.Reader) (*CustomSuite, error) {
	s := &CustomSuite{name: name}
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 || raw[0] == '#' || bytes.HasPrefix(raw, []byte("//")) {
			continue
		}
		fail := func(field, format string, args ...any) error {
			return fmt.Errorf("%s:%d:%s: %s", file, lineNo, field, fmt.Sprintf(format, args...))
		}
		c, field, err := parseCustomLine(raw)
		if err != nil {
			return nil, fail(field, "%v", err)
		}
		if first, dup := seen[c.ID]; dup {
			return nil, fail("id", "%q was already used on line %d: give every case its own id", c.ID, first)
		}
		seen[c.ID] = lineNo
		c.Suite = name
		s.cases = append(s.cases, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: reading the file: %w", file, lineNo+1, err)
	}
	if len(s.cases) == 0 {
		return nil, fmt.Errorf("%s: no cases: write one JSON object per line (see docs/evals.md)", file)
	}
	return s, nil
}

// parseCustomLine turns one line into a case; on error it names the field.
func parseCustomLine(raw []byte) (Case, string, error) {
	var l customLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Case{}, te.Field, fmt.Errorf("not a valid case: %w", err)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return Case{}, strings.Trim(f, `"`), errors.New("unknown field: the fields are id, prompt, messages, tools, expect, max_tokens; expect holds exact, regex, schema or tool")
		}
		return Case{}, "", fmt.Errorf("not a valid case: %w", err)
	}
	if dec.More() {
		return Case{}, "", errors.New("more than one JSON value on the line: put one case per line")
	}
	var c Case
	if strings.TrimSpace(l.ID) == "" {
		return c, "id", errors.New("missing: give every case an id")
	}
	c.ID = l.ID
	switch {
	case l.Prompt != nil && l.Messages != nil:
		return c, "prompt", errors.New("give prompt or messages, not both")
	case l.Prompt != nil:
		if strings.TrimSpace(*l.Prompt) == "" {
			return c, "prompt", errors.New("empty")
		}
		c.Request.Messages = []Message{{Role: "user", Content: *l.Prompt}}
	case len(l.Messages) > 0:
		for i, m := range l.Messages {
			switch m.Role {
			case "system", "user", "assistant", "tool", "developer":
			default:
				return c, fmt.Sprintf("messages[%d].role", i), fmt.Errorf("%q is not a chat role (system, user, assistant, tool, developer)", m.Role)
			}
		}
		c.Request.Messages = l.Messages
	default:
		return c, "prompt", errors.New("missing: give prompt or messages")
	}
	c.Request.MaxTokens = DefaultCustomMaxTokens
	if l.MaxTokens != nil {
		if *l.MaxTokens < 1 {
			return c, "max_tokens", fmt.Errorf("%d: must be at least 1", *l.MaxTokens)
		}
		c.Request.MaxTokens = *l.MaxTokens
	}
	var ts *ToolSet
	if len(l.Tools) > 0 {
		var err error
		if ts, err = NewToolSet(l.Tools); err != nil {
			field, msg, _ := strings.Cut(err.Error(), " ")
			return c, field, errors.New(msg)
		}
		c.Request.Tools = l.Tools
		c.Request.ToolChoice = "auto"
	}
	if l.Expect == nil {
		return c, "expect", errors.New("missing: give one of exact, regex, schema, tool")
	}
	e := l.Expect
	set := 0
	for _, p := range []bool{e.Exact != nil, e.Regex != nil, e.Schema != nil, e.Tool != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return c, "expect", fmt.Errorf("%d expectations given: give exactly one of exact, regex, schema, tool", set)
	}
	switch {
	case e.Exact != nil:
		c.Check = ExactCheck{Want: *e.Exact}
	case e.Regex != nil:
		re, err := regexp.Compile(*e.Regex)
		if err != nil {
			return c, "expect.regex", fmt.Errorf("does not compile: %w", err)
		}
		c.Check = RegexCheck{Re: re}
	case e.Schema != nil:
		sc, err := NewSchemaCheck(*e.Schema)
		if err != nil {
			return c, "expect.schema", err
		}
		c.Check = sc
	case e.Tool != nil:
		if ts == nil {
			return c, "expect.tool", errors.New("no tools offered: add a tools list holding the expected tool")
		}
		tc, err := ts.Expect(*e.Tool)
		if err != nil {
			return c, "expect.tool", err
		}
		c.Check = tc
	}
	return c, "", nil
}
