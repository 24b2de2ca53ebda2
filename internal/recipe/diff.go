package recipe

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Change is one field that differs between two recipes.
type Change struct {
	// Path names the field as the recipe file spells it, e.g. "nodes",
	// "args[--max-num-seqs]", "deploy.kubernetes.manifests".
	Path string
	// Old and New are the values as text; "" means unset.
	Old, New string
	// Thing is the recipe change this field belongs to under the one-change
	// rule (see Counts), or "" when the field is not part of the serving
	// setup (name, parent, price, endpoint, metrics, mapping, deploy).
	Thing string
}

// Counts reports whether the change counts toward the one-change rule.
//
// These fields count, grouped into things: engine and image ("engine": an
// image bump is an engine version change), each engine flag in args on its
// own ("args --flag"), nodes and gpus_per_node together ("layout"), copies,
// router, model and sim.profile; when the engine itself changes, its flags
// are part of that change (each engine spells its own). These do not count: name, parent, file,
// usd_per_gpu_hour (the price changes the cost, not the recipe), endpoint,
// metrics, mapping, mapping_file and deploy (how a recipe is put up, not
// what it is).
func (c Change) Counts() bool { return c.Thing != "" }

// Diff lists the fields that differ from a to b, in field order. Args are
// compared flag by flag ("--flag value", "--flag=value" and bare "--flag"),
// so reordering flags is not a change; copies 0 and 1 are the same.
func Diff(a, b Recipe) []Change {
	fa, fb := flatten(a), flatten(b)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var out []Change
	for k := range keys {
		if fa[k] == fb[k] {
			continue
		}
		out = append(out, Change{Path: k, Old: fa[k], New: fb[k], Thing: thing(k)})
	}
	// A new engine is launched with its own flags (SGLang's --context-length
	// for vLLM's --max-model-len): when the engine itself changes, the flags
	// are part of that one change.
	if fa["engine"] != fb["engine"] {
		for i := range out {
			if strings.HasPrefix(out[i].Path, "args[") {
				out[i].Thing = "engine"
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		oi, oj := order(out[i].Path), order(out[j].Path)
		if oi != oj {
			return oi < oj
		}
		return out[i].Path < out[j].Path
	})
	return out
}

// fieldOrder is the order fields appear in a recipe file; it orders a diff.
var fieldOrder = []string{"file", "name", "engine", "image", "args", "parent", "nodes", "gpus_per_node",
	"copies", "router", "usd_per_gpu_hour", "endpoint", "model", "metrics", "mapping", "mapping_file", "sim", "deploy"}

func order(path string) int {
	top := path
	if i := strings.IndexAny(path, ".["); i >= 0 {
		top = path[:i]
	}
	for i, f := range fieldOrder {
		if f == top {
			return i
		}
	}
	return len(fieldOrder)
}

func thing(path string) string {
	switch {
	case path == "engine" || path == "image":
		return "engine"
	case path == "nodes" || path == "gpus_per_node":
		return "layout"
	case path == "copies" || path == "router" || path == "model" || path == "sim.profile":
		return path
	case strings.HasPrefix(path, "args["):
		return "args " + strings.TrimSuffix(strings.TrimPrefix(path, "args["), "]")
	}
	return ""
}

// flatten turns a recipe into field path -> value text. Lists other than
// args are kept whole; args are split into flags.
func flatten(r Recipe) map[string]string {
	r.Dir = ""
	if r.Copies == 0 {
		r.Copies = 1
	}
	args := r.Args
	r.Args = nil
	b, err := json.Marshal(r)
	if err != nil {
		panic("recipe: marshal: " + err.Error()) // plain data; cannot fail
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic("recipe: unmarshal: " + err.Error())
	}
	out := map[string]string{}
	walk("", m, out)
	for k, v := range flags(args) {
		out["args["+k+"]"] = v
	}
	return out
}

func walk(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, e, out)
		}
	case nil:
	case string:
		if x != "" {
			out[prefix] = x
		}
	case float64:
		if x != 0 {
			out[prefix] = strconv.FormatFloat(x, 'g', -1, 64)
		}
	case bool:
		out[prefix] = strconv.FormatBool(x)
	default:
		b, _ := json.Marshal(x)
		if s := string(b); s != "[]" && s != "null" {
			out[prefix] = s
		}
	}
}

// flags splits engine args into flag -> value. A flag takes the next token
// as its value unless that token is itself a flag; a bare flag reads "set";
// a repeated flag joins its values with ", "; tokens before any flag are
// positional and keyed "#1", "#2", ...
func flags(args []string) map[string]string {
	out := map[string]string{}
	add := func(k, v string) {
		if old, ok := out[k]; ok {
			v = old + ", " + v
		}
		out[k] = v
	}
	pos := 0
	for i := 0; i < len(args); i++ {
		a := strings.TrimSpace(args[i])
		if !isFlag(a) {
			pos++
			add("#"+strconv.Itoa(pos), a)
			continue
		}
		if k, v, ok := strings.Cut(a, "="); ok {
			add(k, v)
			continue
		}
		if i+1 < len(args) && !isFlag(strings.TrimSpace(args[i+1])) {
			add(a, strings.TrimSpace(args[i+1]))
			i++
			continue
		}
		add(a, "set")
	}
	return out
}

func isFlag(s string) bool {
	if !strings.HasPrefix(s, "-") || len(s) < 2 {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err != nil // a negative number is a value, not a flag
}

// Warning is one lint finding about a candidate recipe.
type Warning struct {
	// Field is the field the warning is about, e.g. "parent".
	Field   string
	Message string
}

func (w Warning) String() string { return w.Field + ": " + w.Message }

// Lint checks a candidate against its parent under the method's one-change
// rule: a candidate changes exactly one thing (see Change.Counts), so a
// difference in capacity can be pinned on it. It also warns when the
// candidate does not name this parent or reuses its name.
func Lint(candidate, parent Recipe) []Warning {
	var ws []Warning
	switch {
	case candidate.Parent == "":
		ws = append(ws, Warning{"parent", fmt.Sprintf("is not set; name the parent recipe (%q) so reports can say what changed", parent.Name)})
	case !isFileRef(candidate.Parent) && candidate.Parent != parent.Name:
		ws = append(ws, Warning{"parent", fmt.Sprintf("names %q but was compared with %q", candidate.Parent, parent.Name)})
	}
	if candidate.Name != "" && candidate.Name == parent.Name {
		ws = append(ws, Warning{"name", fmt.Sprintf("%q is the parent's name too; give the candidate its own so their run directories do not mix", candidate.Name)})
	}
	things := Things(Diff(parent, candidate))
	switch {
	case len(things) == 0:
		ws = append(ws, Warning{"recipe", "changes nothing that counts from its parent: it would measure the same serving setup again"})
	case len(things) > 1:
		ws = append(ws, Warning{"recipe", fmt.Sprintf("changes %d things from its parent (%s); the one-change rule wants one, so a change in capacity can be pinned on it: split it into candidates that each change one thing, or say in the report why these go together",
			len(things), strings.Join(things, ", "))})
	}
	return ws
}

// Things lists the distinct things the changes make under the one-change
// rule, in order.
func Things(changes []Change) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range changes {
		if c.Counts() && !seen[c.Thing] {
			seen[c.Thing] = true
			out = append(out, c.Thing)
		}
	}
	return out
}

func isFileRef(p string) bool {
	_, ok := Recipe{Parent: p}.ParentFile()
	return ok
}

// DiffText renders the diff from a to b as aligned text for
// `headroom recipe diff`: one line per changed field, marked with the thing
// it changes or "does not count", and a closing line with the count.
func DiffText(a, b Recipe) string {
	changes := Diff(a, b)
	var sb strings.Builder
	fmt.Fprintf(&sb, "recipe diff: %s -> %s\n", orUnset(a.Name), orUnset(b.Name))
	if len(changes) == 0 {
		sb.WriteString("  no differences\n")
		return sb.String()
	}
	tw := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	for _, c := range changes {
		note := "does not count"
		if c.Counts() {
			note = "changes " + c.Thing
		}
		fmt.Fprintf(tw, "  %s\t%s\t->\t%s\t(%s)\n", c.Path, orUnset(c.Old), orUnset(c.New), note)
	}
	tw.Flush()
	things := Things(changes)
	switch len(things) {
	case 0:
		sb.WriteString("no recipe change counts under the one-change rule\n")
	case 1:
		fmt.Fprintf(&sb, "1 thing changed: %s\n", things[0])
	default:
		fmt.Fprintf(&sb, "%d things changed: %s (the one-change rule wants one)\n", len(things), strings.Join(things, ", "))
	}
	return sb.String()
}

func orUnset(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}
