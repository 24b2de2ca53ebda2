package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Override is one change made to a run file from the command line: a
// field, by its path as the run file spells it, and its new value.
type Override struct {
	// Path is dotted, with [i] for a list item: sweep.ladder,
	// sweep.ladder[2], recipe.headers.X-Team.
	Path string
	// Value is YAML: a scalar, or a flow list such as [4, 8, 16]. A string
	// field takes it as written; on any other field "" or null removes it.
	Value string
	// Flag names the override in errors ("--set sweep.ladder",
	// "--endpoint"); never the value, which may be a secret.
	Flag string
}

// ParseSet reads one --set argument, path=value, e.g. sweep.ladder=[4,8,16]
// or recipe.headers.X-Team=blue.
func ParseSet(arg string) (Override, error) {
	path, value, ok := strings.Cut(arg, "=")
	path = strings.TrimSpace(path)
	if !ok {
		return Override{}, fmt.Errorf("--set %s: give path=value with the field as the run file spells it, e.g. --set sweep.ladder=[4,8,16]", arg)
	}
	if path == "" {
		return Override{}, errors.New("--set: the field before = is empty; e.g. --set bar.ttft_p90_s=3")
	}
	if _, err := parsePath(path); err != nil {
		return Override{}, fmt.Errorf("--set %s: %v", path, err)
	}
	return Override{Path: path, Value: value, Flag: "--set " + path}, nil
}

// ParseWith is Parse with the overrides applied on top of the file, in
// order; the result is decoded and checked exactly as a file is.
func ParseWith(b []byte, name string, ovs ...Override) (Run, error) {
	return parse(b, name, true, ovs)
}

// LoadWith reads a run file, applies the overrides on top and validates.
func LoadWith(path string, ovs ...Override) (Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Run{}, fmt.Errorf("read run file: %w", err)
	}
	return ParseWith(b, path, ovs...)
}

// DefaultWith is the built-in default run with the overrides applied on
// top, validated as a file is.
func DefaultWith(ovs ...Override) (Run, error) {
	return parse(defaultYAML, "the built-in default run", false, ovs)
}

// pathStep is one step of a field path: a field or map key, or a list index.
type pathStep struct {
	key     string
	index   int
	isIndex bool
}

// parsePath splits a.b[2].c into its steps.
func parsePath(s string) ([]pathStep, error) {
	if s == "" {
		return nil, errors.New("the field path is empty")
	}
	var steps []pathStep
	for _, part := range strings.Split(s, ".") {
		name, idx := part, ""
		if i := strings.IndexByte(part, '['); i >= 0 {
			name, idx = part[:i], part[i:]
		}
		if name == "" {
			return nil, fmt.Errorf("%q has an empty field name; write a.b, or a.b[2] for a list item", s)
		}
		steps = append(steps, pathStep{key: name})
		for idx != "" {
			end := strings.IndexByte(idx, ']')
			if idx[0] != '[' || end < 0 {
				return nil, fmt.Errorf("%q: write a list item as name[2]", s)
			}
			n, err := strconv.Atoi(idx[1:end])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%q: [%s] is not a list index (0, 1, 2, ...)", s, idx[1:end])
			}
			steps = append(steps, pathStep{index: n, isIndex: true})
			idx = idx[end+1:]
		}
	}
	return steps, nil
}

// apply makes the override o in the tree; the field must exist in the
// run file's schema. The nodes it sets are marked with o.Flag.
func (s *source) apply(o Override) error {
	steps, err := parsePath(o.Path)
	if err != nil {
		return fmt.Errorf("%s: %v", o.Flag, err)
	}
	if s.doc == nil {
		return fmt.Errorf("%s: %s is not YAML, so nothing can be set in it", o.Flag, s.name)
	}
	top, err := s.setIn(s.top(), s.root, steps, "", o)
	if err != nil {
		return err
	}
	s.doc.Content[0] = top
	return nil
}

// setIn returns n (of Go type t, at path; nil when absent) with the value
// at steps below it set from o.
func (s *source) setIn(n *yaml.Node, t reflect.Type, steps []pathStep, path string, o Override) (*yaml.Node, error) {
	t = deref(t)
	if len(steps) == 0 {
		return s.value(t, o)
	}
	if freeForm(t) {
		return nil, fmt.Errorf("%s: %s holds free-form data; set it whole (--set %s=...)", o.Flag, path, path)
	}
	if n != nil && n.Kind == yaml.AliasNode { // change a copy, not the anchor
		cp := *deAlias(n)
		cp.Content = append([]*yaml.Node(nil), cp.Content...)
		n = &cp
	}
	st := steps[0]
	if st.isIndex {
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil, fmt.Errorf("%s: %s is not a list; drop [%d]", o.Flag, path, st.index)
		}
		if n == nil || n.Kind != yaml.SequenceNode {
			n = s.mark(&yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}, o)
		}
		item := fmt.Sprintf("%s[%d]", path, st.index)
		if st.index > len(n.Content) {
			return nil, fmt.Errorf("%s: %s has %d items, so [%d] is past its end; [%d] adds one", o.Flag, path, len(n.Content), st.index, len(n.Content))
		}
		var old *yaml.Node
		if st.index < len(n.Content) {
			old = n.Content[st.index]
		}
		v, err := s.setIn(old, t.Elem(), steps[1:], item, o)
		if err != nil {
			return nil, err
		}
		if old == nil {
			n.Content = append(n.Content, v)
		} else {
			n.Content[st.index] = v
		}
		return n, nil
	}
	var elem reflect.Type
	key := st.key
	switch t.Kind() {
	case reflect.Struct:
		f, ok := fieldNamed(t, st.key)
		if !ok {
			return nil, fmt.Errorf("%s: %s: %s", o.Flag, join(path, st.key), unknownMsg(s.root, t, path, st.key))
		}
		elem, key = f.typ, f.name
	case reflect.Map:
		elem = t.Elem()
	default:
		return nil, fmt.Errorf("%s: %s is a single value, not a section with fields; drop .%s", o.Flag, path, st.key)
	}
	if n == nil || n.Kind != yaml.MappingNode {
		n = s.mark(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, o)
	}
	i := -1
	for j := 0; j+1 < len(n.Content); j += 2 {
		if k := n.Content[j].Value; k == key || (t.Kind() == reflect.Struct && i < 0 && strings.EqualFold(k, key)) {
			i = j
		}
	}
	if len(steps) == 1 && deref(elem).Kind() != reflect.String && isNullText(o.Value) {
		if i >= 0 { // null removes the field: the default applies
			n.Content = append(n.Content[:i], n.Content[i+2:]...)
		}
		return n, nil
	}
	var old *yaml.Node
	if i >= 0 {
		old = n.Content[i+1]
	}
	v, err := s.setIn(old, elem, steps[1:], join(path, key), o)
	if err != nil {
		return nil, err
	}
	if i < 0 {
		n.Content = append(n.Content, s.mark(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, o), v)
		return n, nil
	}
	if len(steps) == 1 { // this key's value now comes from the flag
		s.mark(n.Content[i], o)
	}
	n.Content[i+1] = v
	return n, nil
}

// value is o's value as a node for a field of type t: the text as written
// for a string, else the YAML it reads as.
func (s *source) value(t reflect.Type, o Override) (*yaml.Node, error) {
	if t.Kind() == reflect.String {
		return s.mark(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: o.Value, Style: yaml.DoubleQuotedStyle}, o), nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(o.Value), &doc); err != nil {
		return nil, fmt.Errorf("%s: the value is not YAML (%v); write a number as 3, a list as [4,8,16]", o.Flag, err)
	}
	v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		v = doc.Content[0]
	}
	var mark func(*yaml.Node)
	mark = func(n *yaml.Node) {
		s.mark(n, o)
		for _, c := range n.Content {
			mark(c)
		}
	}
	mark(v)
	return v, nil
}

func (s *source) mark(n *yaml.Node, o Override) *yaml.Node {
	s.flags[n] = o.Flag
	return n
}

func isNullText(v string) bool {
	switch strings.TrimSpace(v) {
	case "", "null", "Null", "NULL", "~":
		return true
	}
	return false
}

// fieldInfo is one field of a struct as the run file spells it.
type fieldInfo struct {
	name string
	typ  reflect.Type
}

// fields lists t's fields by their JSON names, in order; fields of an
// embedded struct without a name of its own (json:",inline") belong to t.
func fields(t reflect.Type) []fieldInfo {
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" && deref(sf.Type).Kind() == reflect.Struct {
			out = append(out, fields(deref(sf.Type))...)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, fieldInfo{name, sf.Type})
	}
	return out
}

// fieldNamed finds the field key names in t: exactly, else ignoring case
// as the decoder does.
func fieldNamed(t reflect.Type, key string) (fieldInfo, bool) {
	fs := fields(t)
	for _, f := range fs {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fs {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return fieldInfo{}, false
}

// unknownMsg says key is not a field of t (at path in a file whose type is
// root) and suggests the nearest one: a sibling within a few edits, else a
// field of that name elsewhere in the file, else the list of t's fields.
func unknownMsg(root, t reflect.Type, path, key string) string {
	fs := fields(t)
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	if near := nearest(key, names); near != "" {
		return fmt.Sprintf("unknown field; did you mean %s?", join(path, near))
	}
	if elsewhere := fieldElsewhere(root, "", key, 0); elsewhere != "" {
		return fmt.Sprintf("unknown field; did you mean %s?", elsewhere)
	}
	where := "the top level"
	if path != "" {
		where = path
	}
	if len(names) > 12 {
		return fmt.Sprintf("unknown field; no field of %s is near it", where)
	}
	return fmt.Sprintf("unknown field; the fields of %s are %s", where, strings.Join(names, ", "))
}

// fieldElsewhere finds a field named key anywhere in the sections of t.
func fieldElsewhere(t reflect.Type, path, key string, depth int) string {
	t = deref(t)
	if t.Kind() != reflect.Struct || depth > 4 {
		return ""
	}
	for _, f := range fields(t) {
		if strings.EqualFold(f.name, key) {
			return join(path, f.name)
		}
	}
	for _, f := range fields(t) {
		if p := fieldElsewhere(f.typ, join(path, f.name), key, depth+1); p != "" {
			return p
		}
	}
	return ""
}

// nearest is the name in names closest to key: within a third of its
// length in edits (at least one, at most three), or one being the other's
// start (warmup_seconds for warmup_s); "" when none is near.
func nearest(key string, names []string) string {
	k := strings.ToLower(key)
	best, bestD := "", math.MaxInt
	for _, name := range names {
		n := strings.ToLower(name)
		d := distance(k, n)
		limit := min(3, max(1, max(len(k), len(n))/3))
		short := min(len(k), len(n))
		if d > limit && !(short >= 4 && (strings.HasPrefix(k, n) || strings.HasPrefix(n, k))) {
			continue
		}
		if d < bestD {
			best, bestD = name, d
		}
	}
	return best
}

// distance is the edit distance between a and b: insertions, deletions,
// substitutions and swaps of neighbours (nmae for name) count one each.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
