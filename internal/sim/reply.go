package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The phrases an eval's long-context read-back case uses: the planted fact
// starts with factLead and the question at the end of the prompt with
// questionLead. They match internal/eval's FactLead and QuestionLead (a test
// checks), so the simulator can answer read-back evals.
const (
	factLead     = "The secret code word is "
	questionLead = "What is the secret code word"
)

// useToolRe finds the tool a prompt asks for ("Use the Edit tool to ...").
var useToolRe = regexp.MustCompile(`Use the ([A-Za-z0-9_.-]+) tool`)

// absPathRe finds absolute file paths in a prompt, for path-like arguments.
var absPathRe = regexp.MustCompile(`(?:^|[\s"'(])(/[A-Za-z0-9_.\-/]*[A-Za-z0-9_\-/])`)

// Kinds of reply.
const (
	replyWords = iota // the answer vocabulary, max_tokens words, finish "length"
	replyText         // scripted words, then "stop"
	replyTool         // one tool call, then "tool_calls"
)

// argFragmentBytes is how much of a tool call's arguments one streamed token
// carries.
const argFragmentBytes = 6

// reply is what a request will say: the vocabulary, scripted text, or a tool
// call. It is fixed before the request is submitted, so the engine knows how
// many tokens it takes.
type reply struct {
	kind   int
	text   []string // replyText: one token each, spaces included
	tool   string   // replyTool: the function name
	callID string
	args   string // replyTool: the arguments, a JSON text
}

// tokens is how many tokens the reply takes when not cut by max_tokens (0 for
// the open-ended vocabulary): for a tool call, one for its name and one per
// fragment of arguments.
func (p *reply) tokens() int {
	switch p.kind {
	case replyText:
		return len(p.text)
	case replyTool:
		return 1 + (len(p.args)+argFragmentBytes-1)/argFragmentBytes
	}
	return 0
}

// finish is the finish reason of a reply that ran to its end.
func (p *reply) finish() string {
	switch p.kind {
	case replyText:
		return finishStop
	case replyTool:
		return finishToolCalls
	}
	return finishLength
}

// argsText is the arguments the client sees: whole, or cut in half when the
// malformed-tool-calls fault struck the request.
func (p *reply) argsText(malformed bool) string {
	if !malformed {
		return p.args
	}
	cut := len(p.args) / 2
	for cut > 0 && !utf8.RuneStart(p.args[cut]) {
		cut--
	}
	return p.args[:cut]
}

// fragment is the arguments carried by token i (i >= 1) of a tool call.
func (p *reply) fragment(i int, malformed bool) string {
	args := p.argsText(malformed)
	lo := (i - 1) * argFragmentBytes
	hi := lo + argFragmentBytes
	// Fragments cut the whole text at fixed offsets; move each cut back to a
	// rune start so no fragment splits a character.
	for lo > 0 && lo < len(p.args) && !utf8.RuneStart(p.args[lo]) {
		lo--
	}
	for hi < len(p.args) && !utf8.RuneStart(p.args[hi]) {
		hi--
	}
	lo, hi = min(lo, len(args)), min(hi, len(args))
	return args[lo:hi]
}

// toolDef is one offered tool as the request sends it.
type toolDef struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// planReply decides what a request will say: a tool call when tools are
// offered (and tool_choice is not "none"), the planted code word when the
// prompt ends with a read-back question, else the vocabulary.
func (s *Sim) planReply(body *chatRequest, seed uint64) (*reply, error) {
	if len(body.Tools) > 0 {
		name, call, err := toolChoice(body.ToolChoice)
		if err != nil {
			return nil, err
		}
		if call {
			return s.toolReply(body, name, seed)
		}
	}
	if code := readBackAnswer(body.Messages); code != "" {
		return &reply{kind: replyText, text: []string{code}}, nil
	}
	return &reply{kind: replyWords}, nil
}

// toolChoice reads tool_choice: "auto" (or absent) and "required" call a
// tool, "none" does not, and {"type":"function","function":{"name":N}} calls N.
func toolChoice(raw json.RawMessage) (name string, call bool, err error) {
	raw = trimJSONSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "auto", "required":
			return "", true, nil
		case "none":
			return "", false, nil
		}
		return "", false, fmt.Errorf("tool_choice %q is not one of auto, required, none or a named function", mode)
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Function.Name == "" {
		return "", false, fmt.Errorf("tool_choice must be a string or {\"type\":\"function\",\"function\":{\"name\":...}}")
	}
	return named.Function.Name, true, nil
}

// lastUserText decodes the last user message's text (parts joined by spaces).
func lastUserText(msgs []chatMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		raw := trimJSONSpace(msgs[i].Content)
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &parts) == nil {
			var b strings.Builder
			for _, p := range parts {
				if p.Type == "text" {
					b.WriteString(p.Text)
					b.WriteByte(' ')
				}
			}
			return b.String()
		}
		return ""
	}
	return ""
}

// toolReply builds a tool call to the tool the prompt names ("Use the X
// tool"), else the forced or first tool, with arguments drawn to fit its
// schema.
func (s *Sim) toolReply(body *chatRequest, forced string, seed uint64) (*reply, error) {
	text := lastUserText(body.Messages)
	pick := -1
	want := forced
	if want == "" {
		if m := useToolRe.FindStringSubmatch(text); m != nil {
			want = m[1]
		}
	}
	for i, t := range body.Tools {
		if t.Function.Name == "" {
			return nil, fmt.Errorf("tools[%d].function.name is empty: give every tool a name", i)
		}
		if pick < 0 && t.Function.Name == want {
			pick = i
		}
	}
	if pick < 0 {
		if forced != "" {
			return nil, fmt.Errorf("tool_choice names %q, which is not among the tools", forced)
		}
		pick = 0
	}
	t := body.Tools[pick]
	var schema any = map[string]any{"type": "object"}
	if p := trimJSONSpace(t.Function.Parameters); len(p) > 0 && string(p) != "null" {
		if err := json.Unmarshal(p, &schema); err != nil {
			return nil, fmt.Errorf("tools[%d].function.parameters (%s) is not JSON: %v", pick, t.Function.Name, err)
		}
	}
	g := &argGen{state: seed | 1, paths: promptPaths(text)}
	args, _ := json.Marshal(g.value(schema, "", 0))
	return &reply{
		kind:   replyTool,
		tool:   t.Function.Name,
		callID: fmt.Sprintf("chatcmpl-tool-%016x", mix64(seed^0x7001)),
		args:   string(args),
	}, nil
}

// promptPaths returns the absolute paths a prompt mentions, in order.
func promptPaths(text string) []string {
	var out []string
	for _, m := range absPathRe.FindAllStringSubmatch(text, 8) {
		out = append(out, m[1])
	}
	return out
}

// readBackAnswer returns the code word planted in the prompt when the last
// message ends with a read-back question, else "".
func readBackAnswer(msgs []chatMessage) string {
	if len(msgs) == 0 {
		return ""
	}
	last := msgs[len(msgs)-1].Content
	// The question closes the prompt: look at its tail only, so ordinary
	// long prompts cost nothing more. The phrases have no characters JSON
	// escapes, so the raw text holds them as written.
	tail := last[max(0, len(last)-1024):]
	if !bytes.Contains(tail, []byte(questionLead)) {
		return ""
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		c := msgs[i].Content
		at := bytes.LastIndex(c, []byte(factLead))
		if at < 0 {
			continue
		}
		rest := c[at+len(factLead):]
		end := bytes.IndexAny(rest, ". \\\"\t")
		if end < 0 {
			end = len(rest)
		}
		if end > 0 {
			return string(rest[:end])
		}
	}
	return ""
}

// argGen draws JSON values that validate against a JSON Schema: objects with
// their required properties (and some optional ones), strings within
// minLength/maxLength that match a simple pattern, numbers within their
// bounds, enums and consts. Draws are deterministic from its state.
type argGen struct {
	state uint64
	paths []string // absolute paths from the prompt, for path-like strings
}

func (g *argGen) next() uint64 {
	g.state += 0x9e3779b97f4a7c15
	return mix64(g.state)
}

func (g *argGen) intn(n int) int {
	if n <= 1 {
		return 0
	}
	return int(g.next() % uint64(n))
}

const maxSchemaDepth = 8

// value draws a value for schema; name is the property it fills (a hint for
// plausible strings).
func (g *argGen) value(schema any, name string, depth int) any {
	sc, ok := schema.(map[string]any)
	if !ok {
		if b, isBool := schema.(bool); isBool && !b {
			return nil // false accepts nothing; nothing better to send
		}
		return g.word()
	}
	if c, ok := sc["const"]; ok {
		return c
	}
	if e, ok := sc["enum"].([]any); ok && len(e) > 0 {
		return e[g.intn(len(e))]
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := sc[key].([]any); ok && len(alts) > 0 {
			// The first alternative is enough for anyOf and usually for
			// oneOf; for allOf, the first part with a type carries it.
			return g.value(alts[0], name, depth+1)
		}
	}
	typ := schemaType(sc)
	if depth > maxSchemaDepth && (typ == "object" || typ == "array") {
		typ = "string"
	}
	switch typ {
	case "object":
		return g.object(sc, depth)
	case "array":
		return g.array(sc, name, depth)
	case "integer":
		return g.integer(sc)
	case "number":
		return g.number(sc)
	case "boolean":
		return g.intn(2) == 1
	case "null":
		return nil
	}
	return g.str(sc, name)
}

// schemaType is the type a schema asks for (the first non-null one of a list),
// inferred from its keywords when it names none.
func schemaType(sc map[string]any) string {
	switch t := sc["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
		if len(t) > 0 {
			return "null"
		}
	}
	switch {
	case sc["properties"] != nil || sc["required"] != nil:
		return "object"
	case sc["items"] != nil:
		return "array"
	case sc["minimum"] != nil || sc["maximum"] != nil:
		return "number"
	}
	return "string"
}

func (g *argGen) object(sc map[string]any, depth int) map[string]any {
	props, _ := sc["properties"].(map[string]any)
	out := map[string]any{}
	required := map[string]bool{}
	if req, ok := sc["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		// Required properties always; an optional one about one time in three.
		if !required[name] && g.intn(3) != 0 {
			continue
		}
		v := g.value(props[name], name, depth+1)
		if v == nil && !required[name] {
			continue
		}
		out[name] = v
	}
	// Required names without a property schema still need a value.
	for name := range required {
		if _, ok := out[name]; !ok {
			out[name] = g.word()
		}
	}
	return out
}

func (g *argGen) array(sc map[string]any, name string, depth int) []any {
	lo, hi := 1, 3
	if v, ok := num(sc["minItems"]); ok {
		lo = int(v)
	}
	if v, ok := num(sc["maxItems"]); ok {
		hi = int(v)
	}
	hi = max(hi, lo)
	n := lo + g.intn(min(hi, lo+2)-lo+1)
	items := sc["items"]
	out := make([]any, 0, n)
	for range n {
		out = append(out, g.value(items, name, depth+1))
	}
	return out
}

func num(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}

// bounds returns the inclusive range a number must fall in, from minimum,
// maximum and their exclusive forms (step is the smallest move: 1 for
// integers).
func bounds(sc map[string]any, step float64) (lo, hi float64) {
	lo, hi = 1, 100
	hasLo, hasHi := false, false
	if v, ok := num(sc["minimum"]); ok {
		lo, hasLo = v, true
	}
	if v, ok := num(sc["exclusiveMinimum"]); ok {
		lo, hasLo = v+step, true
	}
	if v, ok := num(sc["maximum"]); ok {
		hi, hasHi = v, true
	}
	if v, ok := num(sc["exclusiveMaximum"]); ok {
		hi, hasHi = v-step, true
	}
	switch {
	case hasLo && !hasHi:
		hi = lo + 99
	case hasHi && !hasLo:
		lo = min(hi-99, 1)
	}
	if hi > lo+1000 {
		hi = lo + 1000 // keep values small and readable
	}
	return lo, hi
}

func (g *argGen) integer(sc map[string]any) int64 {
	lo, hi := bounds(sc, 1)
	ilo, ihi := int64(ceil(lo)), int64(floor(hi))
	if ihi < ilo {
		return ilo
	}
	return ilo + int64(g.intn(int(ihi-ilo+1)))
}

func (g *argGen) number(sc map[string]any) float64 {
	lo, hi := bounds(sc, 0.001)
	if hi < lo {
		return lo
	}
	steps := int((hi - lo) * 4)
	return lo + float64(g.intn(steps+1))/4
}

func ceil(f float64) float64 {
	i := float64(int64(f))
	if i < f {
		i++
	}
	return i
}

func floor(f float64) float64 {
	i := float64(int64(f))
	if i > f {
		i--
	}
	return i
}

var plainWords = []string{"config", "retry", "handler", "cache", "session", "queue", "parse", "limits", "tests", "server"}

func (g *argGen) word() string { return plainWords[g.intn(len(plainWords))] }

// str draws a string: a candidate that suits the property's name, then
// fallbacks, keeping the first that satisfies minLength, maxLength and a
// pattern Go's regexp can compile.
func (g *argGen) str(sc map[string]any, name string) string {
	minLen, maxLen := 0, -1
	if v, ok := num(sc["minLength"]); ok {
		minLen = int(v)
	}
	if v, ok := num(sc["maxLength"]); ok {
		maxLen = int(v)
	}
	var re *regexp.Regexp
	if p, ok := sc["pattern"].(string); ok {
		re, _ = regexp.Compile(p)
	}
	path := "/repo/internal/" + g.word() + "/" + g.word() + ".go"
	if len(g.paths) > 0 {
		path = g.paths[g.intn(len(g.paths))]
	}
	lower := strings.ToLower(name)
	var candidates []string
	switch {
	case strings.Contains(lower, "path") || strings.Contains(lower, "file") || strings.Contains(lower, "dir"):
		candidates = append(candidates, path)
	case strings.Contains(lower, "command"):
		candidates = append(candidates, "go test ./...")
	case strings.Contains(lower, "pattern") || strings.Contains(lower, "glob"):
		candidates = append(candidates, "**/*.go")
	case sc["format"] == "date-time":
		candidates = append(candidates, "2025-01-01T00:00:00Z")
	case sc["format"] == "uri":
		candidates = append(candidates, "https://example.com/"+g.word())
	}
	candidates = append(candidates, g.word()+" "+g.word(), path, g.word(), "a", strconv.Itoa(g.intn(1000)))
	fit := func(s string) (string, bool) {
		for utf8.RuneCountInString(s) < minLen {
			s += "x"
		}
		if maxLen >= 0 && utf8.RuneCountInString(s) > maxLen {
			s = string([]rune(s)[:maxLen])
		}
		return s, re == nil || re.MatchString(s)
	}
	for _, c := range candidates {
		if s, ok := fit(c); ok {
			return s
		}
	}
	s, _ := fit(candidates[0])
	return s
}
