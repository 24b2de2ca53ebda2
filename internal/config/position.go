package config

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/transport"
	"go.yaml.in/yaml/v3"
	k8syaml "sigs.k8s.io/yaml"
)

// parse decodes run-file text b strictly, applies the overrides on top,
// resolves the recipe, fills defaults and validates, and reports every
// problem, each with its place. lines is false for the built-in default.
func parse(b []byte, name string, lines bool, ovs []Override) (Run, error) {
	if fe := textProblems(b, name); len(fe) > 0 {
		return Run{}, &Errors{Name: name, List: fe}
	}
	src, yerr := newSource(b, name, reflect.TypeFor[Run](), lines)
	if yerr != nil && len(ovs) > 0 {
		return Run{}, &Errors{Name: name, List: []FieldError{syntaxError(name, yerr)}}
	}
	for _, o := range ovs {
		if err := src.apply(o); err != nil {
			return Run{}, err
		}
	}
	text := b
	if len(ovs) > 0 {
		var err error
		if text, err = yaml.Marshal(src.doc); err != nil {
			return Run{}, fmt.Errorf("%s: %v", name, err)
		}
	}
	if fe := src.notNumbers(); len(fe) > 0 {
		return Run{}, &Errors{Name: name, List: fe}
	}
	errs := &Errors{Name: name, List: src.check(src.top(), src.root, "")}
	var r Run
	if err := k8syaml.UnmarshalStrict(text, &r); err != nil {
		r = Run{}
		lerr := k8syaml.Unmarshal(text, &r)
		var te *json.UnmarshalTypeError
		switch {
		case lerr == nil && len(errs.List) > 0:
			// the walk found what the strict decode refused
		case errors.As(lerr, &te):
			if !errs.typeAt(te.Field) {
				f, _ := src.at(te.Field, fmt.Sprintf("want a value of type %s, got %s", te.Type, te.Value))
				f.typ = true
				errs.List = append(errs.List, f)
			}
		default:
			errs.List = append(errs.List, syntaxError(name, err))
			errs.sort()
			return Run{}, errs
		}
	}
	base := filepath.Dir(name)
	var rsrc *source // the recipe file's tree, when the recipe is in one
	if r.Recipe.File != "" {
		p := relPath(base, r.Recipe.File)
		if rb, err := os.ReadFile(p); err == nil {
			if rs, err := newSource(rb, p, reflect.TypeFor[recipe.Recipe](), true); err == nil {
				rsrc = rs
				errs.List = append(errs.List, rs.check(rs.top(), rs.root, "")...)
			}
		}
	}
	rc, err := recipe.Resolve(r.Recipe, base)
	if err != nil {
		if rsrc == nil || len(errs.inFile(rsrc.name)) == 0 {
			errs.List = append(errs.List, recipeErrors(err, src, rsrc)...)
		}
		errs.sort()
		return Run{}, errs
	}
	r.Recipe = rc
	r.fillDefaults()
	if err := r.Validate(); err != nil {
		for _, line := range problemLines(err.Error(), "invalid run file:") {
			path, msg := splitProblem(line)
			if path != "" && errs.typeAt(path) || errs.typeMentioned(msg) {
				continue // follows from a value of the wrong type, reported already
			}
			errs.List = append(errs.List, placeRun(src, rsrc, path, msg))
		}
	}
	if len(errs.List) == 0 {
		return r, nil
	}
	errs.sort()
	return Run{}, errs
}

// placeRun places a problem the run's validation found: in the recipe file
// for a recipe field when the recipe is in one, else in the run file.
func placeRun(src, rsrc *source, path, msg string) FieldError {
	if path == "" {
		return FieldError{File: src.name, Msg: msg}
	}
	if rsrc != nil && strings.HasPrefix(path, "recipe.") && path != "recipe.file" {
		f, found := rsrc.at(strings.TrimPrefix(path, "recipe."), msg)
		f.Path = path
		if !found {
			f = FieldError{File: rsrc.name, Path: path, Msg: msg}
		}
		return f
	}
	f, _ := src.at(path, msg)
	return f
}

// recipeErrors places what reading the recipe file said: its own
// problems in it, the rest at the run file's recipe.file.
func recipeErrors(err error, src, rsrc *source) []FieldError {
	msg := err.Error()
	if rsrc != nil {
		if rest, ok := strings.CutPrefix(msg, rsrc.name+": "); ok {
			if strings.HasPrefix(rest, "invalid recipe:") {
				var out []FieldError
				for _, line := range problemLines(rest, "invalid recipe:") {
					path, m := splitProblem(line)
					f, found := rsrc.at(path, m)
					if !found {
						f = FieldError{File: rsrc.name, Path: path, Msg: m}
					}
					out = append(out, f)
				}
				return out
			}
			if path, m := splitProblem(rest); path != "" {
				if f, found := rsrc.at(path, m); found {
					return []FieldError{f}
				}
			}
		}
	}
	if path, m := splitProblem(msg); path == "recipe.file" {
		f, _ := src.at(path, m)
		return []FieldError{f}
	}
	f, _ := src.at("recipe.file", msg)
	return []FieldError{f}
}

// problemLines splits a validation error ("invalid run file:" and one
// problem a line) into its problems.
func problemLines(msg, header string) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimPrefix(msg, header), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// splitProblem splits "sweep.ladder[1]: must be larger" into its field
// path and message; path is "" when the line names no field.
func splitProblem(line string) (path, msg string) {
	p, m, ok := strings.Cut(line, ": ")
	if !ok || p == "" || strings.ContainsAny(p, " \t\"") {
		return "", line
	}
	return p, m
}

// yamlLine is a YAML parser's "line N: message".
var yamlLine = regexp.MustCompile(`^(?:error converting YAML to JSON: )?yaml: line (\d+): (.*)$`)

// syntaxError places a decoder's error at its line when it names one.
func syntaxError(name string, err error) FieldError {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return FieldError{File: name, Line: n, Msg: m[2]}
	}
	return FieldError{File: name, Msg: err.Error()}
}

// typeAt reports whether a value of the wrong type is reported at path
// (list indices aside) or above it.
func (e *Errors) typeAt(path string) bool {
	path = stripIndex(path)
	for _, f := range e.List {
		if p := stripIndex(f.Path); f.typ && (p == path || strings.HasPrefix(path, p+".")) {
			return true
		}
	}
	return false
}

// typeMentioned reports whether msg names a field whose value is of the
// wrong type ("8 is not a step of sweep.ladder").
func (e *Errors) typeMentioned(msg string) bool {
	for _, f := range e.List {
		if p := stripIndex(f.Path); f.typ && p != "" && strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// inFile is the problems reported in file.
func (e *Errors) inFile(file string) []FieldError {
	var out []FieldError
	for _, f := range e.List {
		if f.File == file {
			out = append(out, f)
		}
	}
	return out
}

var index = regexp.MustCompile(`\[\d+\]`)

func stripIndex(path string) string { return index.ReplaceAllString(path, "") }

// relPath is p read from dir, as recipe.Resolve reads a recipe file.
func relPath(dir, p string) string {
	if p == "" || filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

// FieldError is one problem in a run file: where it is, the field's path as
// the run file spells it (sweep.ladder[1]) and what is wrong.
type FieldError struct {
	// File is the file the field is in; Line and Col (1-based) are the
	// place of its key or value there, 0 when the file does not hold it.
	File      string
	Line, Col int
	// Flag is the command-line flag that set the field (--set sweep.ladder,
	// --endpoint), when one did; it is named instead of a line.
	Flag string
	Path string
	Msg  string

	unknown bool // an unknown field: the hint points at the list of fields
	typ     bool // a value of the wrong type: its later checks are moot
}

// String is the problem as one line: file:line:col: path: message.
func (e FieldError) String() string {
	loc := e.File
	switch {
	case e.Flag != "":
		loc = e.Flag
	case e.Line > 0 && e.Col > 0:
		loc = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Col)
	case e.Line > 0:
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	// a URL's user info in the value quoted (--endpoint
	// http://user:secret@host) is never printed
	s := new(transport.Redactor).String(e.Msg)
	if e.Path != "" {
		s = e.Path + ": " + s
	}
	if loc != "" {
		s = loc + ": " + s
	}
	return s
}

// Errors is every problem found in one run file (and the recipe file it
// names), listed by line.
type Errors struct {
	// Name is the run file, as given to Parse.
	Name string
	List []FieldError
}

func (e *Errors) Error() string {
	hint := ""
	for _, f := range e.List {
		if f.unknown {
			hint = " (the fields are listed in examples/run.yaml)"
			break
		}
	}
	if len(e.List) == 1 {
		return e.List[0].String() + hint
	}
	lines := make([]string, len(e.List))
	for i, f := range e.List {
		if f.File == e.Name && f.Line == 0 && f.Flag == "" {
			f.File = "" // the first line names the file
		}
		lines[i] = f.String()
	}
	return fmt.Sprintf("%s: %d problems%s:\n  %s", e.Name, len(e.List), hint, strings.Join(lines, "\n  "))
}

// sort orders the problems: the run file's by line, then other files' by
// line, then those set by flags, then those no line holds.
func (e *Errors) sort() {
	rank := func(f FieldError) int {
		switch {
		case f.Flag != "":
			return 2
		case f.Line == 0:
			return 3
		case f.File == e.Name:
			return 0
		}
		return 1
	}
	sort.SliceStable(e.List, func(i, j int) bool {
		a, b := e.List[i], e.List[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return a.Path < b.Path
	})
}

// source is a file's YAML node tree, kept to say where each field is.
type source struct {
	name string
	// doc is the parsed document node; nil when the text is not YAML.
	doc *yaml.Node
	// flags holds the nodes set from the command line, by the flag that
	// set them.
	flags map[*yaml.Node]string
	// lines is false for the built-in default, whose lines mean nothing
	// to the user.
	lines bool
	// root is the Go type of the whole file: Run, or recipe.Recipe for a
	// recipe file.
	root reflect.Type
}

// newSource parses b into a node tree; the error is the YAML syntax error.
func newSource(b []byte, name string, root reflect.Type, lines bool) (*source, error) {
	s := &source{name: name, flags: map[*yaml.Node]string{}, lines: lines, root: root}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return s, err
	}
	if doc.Kind == 0 { // an empty file
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	s.doc = &doc
	return s, nil
}

// top is the document's top node, nil when there is none.
func (s *source) top() *yaml.Node {
	if s.doc == nil || len(s.doc.Content) == 0 {
		return nil
	}
	return s.doc.Content[0]
}

// at is the problem msg at path, placed at the deepest node of path the
// file holds; found is false when the file holds none of it.
func (s *source) at(path, msg string) (f FieldError, found bool) {
	f = FieldError{File: s.name, Path: path, Msg: msg}
	steps, err := parsePath(path)
	if err != nil {
		return f, false
	}
	var last *yaml.Node
	n := s.top()
	for _, st := range steps {
		n = deAlias(n)
		if n == nil {
			break
		}
		var key, val *yaml.Node
		switch {
		case st.isIndex && n.Kind == yaml.SequenceNode && st.index < len(n.Content):
			key, val = n.Content[st.index], n.Content[st.index]
		case !st.isIndex && n.Kind == yaml.MappingNode:
			key, val = findKey(n, st.key, true)
		}
		if key == nil {
			break
		}
		last, n = key, val
	}
	if last == nil {
		return f, false
	}
	s.place(&f, last)
	return f, true
}

// place sets f's line, or its flag when one set n.
func (s *source) place(f *FieldError, n *yaml.Node) {
	if flag, ok := s.flags[n]; ok {
		f.Flag = flag
		return
	}
	if s.lines {
		f.Line, f.Col = n.Line, n.Column
	}
}

// findKey finds key in mapping m (exact first, then ignoring case when
// fold, as the decoder does) and returns its key and value nodes.
func findKey(m *yaml.Node, key string, fold bool) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	if fold {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if strings.EqualFold(m.Content[i].Value, key) {
				return m.Content[i], m.Content[i+1]
			}
		}
	}
	return nil, nil
}

func deAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// check walks the tree under n against the Go type t (the run file's
// struct) and reports every unknown field, every key set twice and every
// value of plainly the wrong kind, each where it is. The strict decode
// stays the judge of types; check only adds places and the full list.
func (s *source) check(n *yaml.Node, t reflect.Type, path string) []FieldError {
	n = deAlias(n)
	t = deref(t)
	if n == nil || isNull(n) || freeForm(t) {
		return nil
	}
	var errs []FieldError
	wrong := func(want string) []FieldError {
		f := FieldError{File: s.name, Path: path, Msg: fmt.Sprintf("want %s, got %s", want, describe(n)), typ: true}
		s.place(&f, n)
		return []FieldError{f}
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if n.Kind != yaml.MappingNode {
			return wrong("a section of fields (name: value lines)")
		}
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				continue
			}
			name, vt := k.Value, reflect.Type(nil)
			if t.Kind() == reflect.Map {
				vt = t.Elem()
			} else if fi, ok := fieldNamed(t, k.Value); ok {
				name, vt = fi.name, fi.typ
			} else {
				f := FieldError{File: s.name, Path: join(path, k.Value), Msg: unknownMsg(s.root, t, path, k.Value), unknown: true}
				s.place(&f, k)
				errs = append(errs, f)
				continue
			}
			if first, dup := seen[name]; dup {
				f := FieldError{File: s.name, Path: join(path, k.Value), Msg: "is set twice; keep one", typ: true}
				if s.lines && first.Line > 0 {
					f.Msg = fmt.Sprintf("is set twice (also on line %d); keep one", first.Line)
				}
				s.place(&f, k)
				errs = append(errs, f)
				continue
			}
			seen[name] = k
			errs = append(errs, s.check(v, vt, join(path, k.Value))...)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return wrong("a list, e.g. [a, b]")
		}
		for i, e := range n.Content {
			errs = append(errs, s.check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			return wrong("a single value")
		}
		quoted := n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if whole, ok := number(n.Value); quoted || !ok || !whole {
				return wrong("a whole number")
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if whole, ok := number(n.Value); quoted || !ok || !whole || strings.HasPrefix(n.Value, "-") {
				return wrong("a whole number >= 0")
			}
		case reflect.Float32, reflect.Float64:
			if _, ok := number(n.Value); quoted || !ok {
				return wrong("a number")
			}
		case reflect.Bool:
			switch strings.ToLower(n.Value) {
			case "true", "false", "yes", "no", "on", "off", "y", "n":
				if !quoted {
					return nil
				}
			}
			return wrong("true or false")
		}
	}
	return errs
}

// describe names what a node holds, for errors.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a section of fields"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 {
		return fmt.Sprintf("the quoted string %q", n.Value)
	}
	return strconv.Quote(n.Value)
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// number reports whether v reads as a number in YAML 1.1 or 1.2, and
// whether it is a whole one.
func number(v string) (whole, ok bool) {
	s := strings.ReplaceAll(v, "_", "")
	if _, err := strconv.ParseInt(s, 0, 64); err == nil {
		return true, true
	}
	if _, err := strconv.ParseUint(s, 0, 64); err == nil {
		return true, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f == math.Trunc(f) && !math.IsInf(f, 0), true
	}
	switch strings.ToLower(s) {
	case ".inf", "+.inf", "-.inf", ".nan":
		return false, true
	}
	return false, false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// freeForm reports whether t takes any YAML (raw JSON, an interface, a
// type that decodes itself), so nothing under it is checked.
func freeForm(t reflect.Type) bool {
	if t.Kind() == reflect.Interface || t == reflect.TypeFor[json.RawMessage]() || t == reflect.TypeFor[[]byte]() {
		return true
	}
	p := reflect.PointerTo(t)
	return p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler)
}
