package recommend

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/rig"
)

// Candidate is one recipe of the space: a value of every axis on top of
// the base, its run file resolved, or why it was skipped.
type Candidate struct {
	// Index numbers the candidate from 1, in the order of the axes' product
	// (the first axis varies slowest).
	Index    int       `json:"index"`
	Label    string    `json:"label"`
	Settings []Setting `json:"settings"`
	// Config is the candidate's run file, on the virtual clock with the
	// adaptive sweep; zero when skipped.
	Config config.Run `json:"-"`
	// Skip says why the candidate is not run: the run file's validation
	// message, or the constraint it breaks; "" when it runs.
	Skip       string  `json:"-"`
	GPUs       int     `json:"gpus"`
	USDPerHour float64 `json:"usd_per_hour"`
}

// Setting is one axis's value in a candidate.
type Setting struct {
	Axis  string `json:"axis"`
	Value string `json:"value"`
}

// Candidates expands the space into its candidates, each with its run
// file resolved and checked; an invalid combination or one over the
// constraints is kept with its reason in Skip. The space may hold at most
// MaxCandidates.
func (s Space) Candidates() ([]Candidate, error) {
	if n := s.Size(); n > MaxCandidates {
		var dims []string
		for _, a := range s.Axes {
			dims = append(dims, fmt.Sprintf("%s %d", a.Name, len(a.Options)))
		}
		return nil, fmt.Errorf("%s: the axes make %d candidates (%s), over the %d one search runs: drop values, or split the space into several files", s.File, n, strings.Join(dims, " x "), MaxCandidates)
	}
	// the base with the space's set and recommend's own fields: a problem
	// of its own is told once, not once per candidate
	base, baseErr := config.ParseWith(s.Base, s.BaseName, append(append([]config.Override(nil), s.Set...), s.own(0)...)...)
	if baseErr != nil {
		// valid at time_scale 1: a real endpoint is why
		real := append(append([]config.Override(nil), s.Set...), config.Override{Path: "time_scale", Value: "1", Flag: "recommend time_scale"})
		if b, err := config.ParseWith(s.Base, s.BaseName, real...); err == nil {
			base = b
		}
	}
	if base.Recipe.Endpoint != "" && base.Recipe.Endpoint != config.SimEndpoint {
		return nil, fmt.Errorf("%s: the base's recipe.endpoint is %q: recommend searches recipes on the built-in simulator, so its endpoint must be %q (recipe.sim says what to model)", s.BaseName, base.Recipe.Endpoint, config.SimEndpoint)
	}
	var out []Candidate
	runnable := 0
	pick := make([]int, len(s.Axes))
	for k := 1; ; k++ {
		c := s.candidate(k, pick)
		if c.Skip == "" {
			runnable++
		}
		out = append(out, c)
		i := len(pick) - 1
		for ; i >= 0; i-- {
			if pick[i]++; pick[i] < len(s.Axes[i].Options) {
				break
			}
			pick[i] = 0
		}
		if i < 0 {
			break
		}
	}
	if runnable == 0 && baseErr != nil {
		return nil, fmt.Errorf("no candidate can run, and the base run file (with the space's set) is invalid itself: %w", baseErr)
	}
	return out, nil
}

// own are the fields recommend sets on candidate k (0: the base).
func (s Space) own(k int) []config.Override {
	o := func(path, value string) config.Override {
		return config.Override{Path: path, Value: value, Flag: "recommend " + path}
	}
	ovs := []config.Override{o("time_scale", "virtual"), o("sweep.mode", "adaptive")}
	if k > 0 {
		ovs = append(ovs, o("recipe.name", s.Name+"-"+strconv.Itoa(k)))
	}
	if s.Target > 0 {
		ovs = append(ovs, o("sweep.target", strconv.Itoa(s.Target)))
	}
	if s.Resolution > 0 {
		ovs = append(ovs, o("sweep.resolution", strconv.Itoa(s.Resolution)))
	}
	if s.Output != "" {
		ovs = append(ovs, o("output", s.Output))
	}
	return ovs
}

// candidate builds candidate k from one option of each axis.
func (s Space) candidate(k int, pick []int) Candidate {
	c := Candidate{Index: k}
	ovs := append([]config.Override(nil), s.Set...)
	var words []string
	for i, a := range s.Axes {
		o := a.Options[pick[i]]
		c.Settings = append(c.Settings, Setting{Axis: a.Name, Value: o.Label})
		words = append(words, a.Name+"="+o.Label)
		ovs = append(ovs, o.Set...)
	}
	c.Label = strings.Join(words, " ")
	ovs = append(ovs, s.own(k)...)
	cfg, err := config.ParseWith(s.Base, s.BaseName, ovs...)
	if err != nil {
		c.Skip = oneLine(err.Error())
		return c
	}
	rc := cfg.Recipe
	c.GPUs = rc.Nodes * rc.GPUsPerNode
	c.USDPerHour = float64(c.GPUs) * rc.USDPerGPUHour
	_, simErr := rig.SimOptions(rc) // the engines sized to their GPUs, as the run would start them
	switch {
	case rc.Endpoint != config.SimEndpoint:
		c.Skip = fmt.Sprintf("recipe.endpoint is %q: only the built-in simulator (%q) can be searched", rc.Endpoint, config.SimEndpoint)
	case simErr != nil:
		c.Skip = oneLine(simErr.Error())
	case cfg.Sweep.Target < 1:
		c.Skip = "no target: set target in the space file (or sweep.target in the base)"
	case s.Constraints.MaxGPUs > 0 && c.GPUs > s.Constraints.MaxGPUs:
		c.Skip = fmt.Sprintf("%d GPUs is over constraints.max_gpus (%d)", c.GPUs, s.Constraints.MaxGPUs)
	case s.Constraints.MaxUSDPerHour > 0 && c.USDPerHour > s.Constraints.MaxUSDPerHour:
		c.Skip = fmt.Sprintf("$%.2f an hour is over constraints.max_usd_per_hour ($%.2f)", c.USDPerHour, s.Constraints.MaxUSDPerHour)
	default:
		c.Config = cfg
	}
	return c
}

// oneLine joins a multi-line validation message into one line.
func oneLine(msg string) string {
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}
