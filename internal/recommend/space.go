// Package recommend searches a space of simulated recipes on the virtual
// clock and ranks those that hold the target by $ per session-hour, saying
// which are too close to call and which need a GPU window to settle.
package recommend

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/headroom-bench/headroom/internal/config"
	"go.yaml.in/yaml/v3"
)

// MaxCandidates is the most candidates one search runs.
const MaxCandidates = 200

// SpaceVersion is the space-file schema version this build reads.
const SpaceVersion = 1

// Space is a space file: a base run file, the fields every candidate
// changes, the axes whose product is the candidates, and what a candidate
// may cost.
type Space struct {
	// File is where the space was read from; paths in it are relative to
	// its folder.
	File string
	// Name prefixes each candidate's recipe name (NAME-3); default the
	// file's name without its extension.
	Name string
	// Base is the run-file text every candidate starts from, and BaseName
	// the name its errors and relative paths go by.
	Base     []byte
	BaseName string
	// Target is the sessions a candidate must hold; 0 keeps the base's
	// sweep.target.
	Target int
	// Resolution is how close, in sessions, the adaptive sweep brackets
	// each candidate's capacity; 0 keeps the base's sweep.resolution.
	Resolution int
	// Set is applied to every candidate before its axes' values.
	Set         []config.Override
	Axes        []Axis
	Constraints Constraints
	// Output is the folder for the candidates' run directories; "" keeps
	// the base's output.
	Output string
}

// Axis is one dimension of the space: a field and its values, or options
// that each set several fields together (a layout, an engine).
type Axis struct {
	Name    string
	Options []Option
}

// Option is one value of an axis: its label and the fields it sets.
type Option struct {
	Label string
	Set   []config.Override
}

// Constraints bound what a candidate may use; 0 is no bound.
type Constraints struct {
	MaxGPUs       int     `yaml:"max_gpus" json:"max_gpus,omitempty"`
	MaxUSDPerHour float64 `yaml:"max_usd_per_hour" json:"max_usd_per_hour,omitempty"`
}

// spaceFile is the space file as written.
type spaceFile struct {
	Version     int         `yaml:"version"`
	Name        string      `yaml:"name"`
	Base        yaml.Node   `yaml:"base"`
	Target      int         `yaml:"target"`
	Resolution  int         `yaml:"resolution"`
	Set         yaml.Node   `yaml:"set"`
	Axes        []axisFile  `yaml:"axes"`
	Constraints Constraints `yaml:"constraints"`
	Output      string      `yaml:"output"`
}

type axisFile struct {
	Name    string       `yaml:"name"`
	Path    string       `yaml:"path"`
	Values  []yaml.Node  `yaml:"values"`
	Options []optionFile `yaml:"options"`
}

type optionFile struct {
	Label string    `yaml:"label"`
	Set   yaml.Node `yaml:"set"`
}

// forced are the fields recommend sets itself on every candidate.
var forced = map[string]string{
	"time_scale": "every candidate runs on the virtual clock",
	"sweep.mode": "every candidate runs the adaptive sweep",
}

// Load reads a space file.
func Load(path string) (Space, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Space{}, fmt.Errorf("read space file: %w", err)
	}
	return Parse(b, path)
}

// Parse decodes a space file strictly (unknown fields are errors); name
// is its path, which relative paths in it follow.
func Parse(b []byte, name string) (Space, error) {
	var f spaceFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Space{}, fmt.Errorf("%s: %v (the fields are version, name, base, target, resolution, set, axes, constraints, output; see examples/recommend/space.yaml)", name, err)
	}
	var errs []string
	bad := func(line int, field, format string, args ...any) {
		at := name
		if line > 0 {
			at = fmt.Sprintf("%s:%d", name, line)
		}
		errs = append(errs, fmt.Sprintf("%s: %s: %s", at, field, fmt.Sprintf(format, args...)))
	}
	s := Space{File: name, Name: f.Name, Target: f.Target, Resolution: f.Resolution, Constraints: f.Constraints, Output: f.Output}
	if f.Version != SpaceVersion {
		bad(0, "version", "this build reads version %d, the file says %d", SpaceVersion, f.Version)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	if strings.ContainsAny(s.Name, `/\ `) || s.Name == "" {
		bad(0, "name", "%q must be a word without slashes or spaces (it names each candidate's recipe, NAME-3)", s.Name)
	}
	dir := filepath.Dir(name)
	switch f.Base.Kind {
	case yaml.ScalarNode:
		p := f.Base.Value
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		text, err := os.ReadFile(p)
		if err != nil {
			bad(f.Base.Line, "base", "%v; give the base run file's path, relative to the space file, or the run file itself inline", err)
		}
		s.Base, s.BaseName = text, p
	case yaml.MappingNode:
		text, err := yaml.Marshal(&f.Base)
		if err != nil {
			bad(f.Base.Line, "base", "%v", err)
		}
		s.Base, s.BaseName = text, name+" (inline base)"
	default:
		bad(f.Base.Line, "base", "is required: the base run file's path (relative to the space file), or the run file inline")
	}
	if s.Target < 0 {
		bad(0, "target", "must be a number of sessions >= 1 (or 0 for the base's sweep.target), got %d", s.Target)
	}
	if s.Resolution < 0 {
		bad(0, "resolution", "must be at least 1 session (or 0 for the base's sweep.resolution), got %d", s.Resolution)
	}
	if s.Constraints.MaxGPUs < 0 || s.Constraints.MaxUSDPerHour < 0 {
		bad(0, "constraints", "max_gpus and max_usd_per_hour must be >= 0 (0 is no bound), got %+v", s.Constraints)
	}
	set, err := overrides(&f.Set, "set", name)
	if err != nil {
		errs = append(errs, err.Error())
	}
	s.Set = set
	if len(f.Axes) == 0 {
		bad(0, "axes", "list at least one axis: a field and its values, e.g. {path: recipe.copies, values: [1, 2]}")
	}
	for i, a := range f.Axes {
		ax, err := axisOf(a, i, name)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		s.Axes = append(s.Axes, ax)
	}
	if len(errs) > 0 {
		return Space{}, errors.New(strings.Join(errs, "\n"))
	}
	return s, nil
}

// axisOf reads axis i: path with values, or options each with a set.
func axisOf(a axisFile, i int, file string) (Axis, error) {
	where := fmt.Sprintf("%s: axes[%d]", file, i)
	switch {
	case a.Path != "" && len(a.Options) > 0:
		return Axis{}, fmt.Errorf("%s: give path with values, or options each with its own set, not both", where)
	case a.Path != "":
		if err := checkPath(a.Path); err != nil {
			return Axis{}, fmt.Errorf("%s.path: %v", where, err)
		}
		if len(a.Values) == 0 {
			return Axis{}, fmt.Errorf("%s.values: list the values of %s to try, e.g. [1, 2]", where, a.Path)
		}
		ax := Axis{Name: a.Name}
		if ax.Name == "" {
			ax.Name = a.Path[strings.LastIndexByte(a.Path, '.')+1:]
		}
		for j := range a.Values {
			v := &a.Values[j]
			ax.Options = append(ax.Options, Option{Label: label(v), Set: []config.Override{{
				Path: a.Path, Value: valueText(v), Flag: fmt.Sprintf("%s axes[%d] %s", filepath.Base(file), i, a.Path)}}})
		}
		return ax, nil
	case len(a.Options) > 0:
		if a.Name == "" {
			return Axis{}, fmt.Errorf("%s.name: an axis of options needs a name, e.g. layout", where)
		}
		ax := Axis{Name: a.Name}
		for j, o := range a.Options {
			ow := fmt.Sprintf("axes[%d].options[%d]", i, j)
			if o.Label == "" {
				return Axis{}, fmt.Errorf("%s: %s.label: every option needs a label, e.g. 2x8", file, ow)
			}
			set, err := overrides(&o.Set, ow+".set", file)
			if err != nil {
				return Axis{}, err
			}
			ax.Options = append(ax.Options, Option{Label: o.Label, Set: set})
		}
		return ax, nil
	}
	return Axis{}, fmt.Errorf("%s: give path and values (a field to vary), or name and options (fields varied together)", where)
}

// overrides reads a mapping of field paths to values, in order, as --set
// would take them.
func overrides(n *yaml.Node, field, file string) ([]config.Override, error) {
	if n.Kind == 0 {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: %s: must map field paths to values, e.g. {sweep.step_s: 300}", file, n.Line, field)
	}
	var out []config.Override
	for k := 0; k+1 < len(n.Content); k += 2 {
		key, v := n.Content[k], n.Content[k+1]
		if err := checkPath(key.Value); err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %v", file, key.Line, field, err)
		}
		out = append(out, config.Override{Path: key.Value, Value: valueText(v), Flag: fmt.Sprintf("%s %s %s", filepath.Base(file), field, key.Value)})
	}
	return out, nil
}

// checkPath refuses a field recommend sets itself, and paths --set would.
func checkPath(p string) error {
	if why, ok := forced[p]; ok {
		return fmt.Errorf("%s is set by recommend (%s); drop it", p, why)
	}
	if _, err := config.ParseSet(p + "="); err != nil {
		return err
	}
	return nil
}

// valueText is a value as --set takes it: a scalar as written, anything
// else as flow YAML.
func valueText(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		if n.Tag == "!!null" {
			return "null"
		}
		return n.Value
	}
	c := *n
	c.Style = yaml.FlowStyle
	b, err := yaml.Marshal(&c)
	if err != nil {
		return n.Value
	}
	return strings.TrimSpace(string(b))
}

// label is how a value reads in a candidate's name.
func label(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return "none"
	}
	return valueText(n)
}

// Size is the number of candidates: the product of the axes' values.
func (s Space) Size() int {
	n := 1
	for _, a := range s.Axes {
		n *= len(a.Options)
		if n > 1<<20 {
			return n
		}
	}
	return n
}
