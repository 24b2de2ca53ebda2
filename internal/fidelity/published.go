// Package fidelity holds what the reference report published for each of
// its recipes (examples/reference/published.yaml), so that simulated runs
// of the same recipes can be set beside it: the types and their loading.
package fidelity

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Version is the published file's schema version this build reads.
const Version = 1

// Bound says what kind of figure a published cell is.
type Bound string

// The kinds of published figure.
const (
	Exact   Bound = ""         // "Value" as printed, e.g. "2.88"
	Approx  Bound = "approx"   // "≈ Value", with Low-High when an interval is printed
	Range   Bound = "range"    // "Low–High": from the last step that passed to the first that failed
	AtLeast Bound = "at_least" // "≥ Low": every step up to Low passed
	AtMost  Bound = "at_most"  // "≤ High"
	Below   Bound = "below"    // "< High": the first step run, High, failed
	Words   Bound = "words"    // no figure printed, only words (Text)
)

// Figure is one published cell: the text as printed and the numbers it
// states. Only the numbers its Bound names are set.
type Figure struct {
	// Text is the cell as the report prints it, e.g. "≈ 11 (10–12)".
	Text  string  `json:"text"`
	Value float64 `json:"value,omitempty"`
	Low   float64 `json:"low,omitempty"`
	High  float64 `json:"high,omitempty"`
	Bound Bound   `json:"bound,omitempty"`
}

// HasInterval reports whether the cell prints a low and a high end.
func (f Figure) HasInterval() bool { return f.Low > 0 && f.High > 0 }

func (f Figure) check(field string) []string {
	var errs []string
	bad := func(format string, args ...any) {
		errs = append(errs, field+": "+fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(f.Text) == "" {
		bad("text is empty: give the cell as the report prints it")
	}
	if f.Value < 0 || f.Low < 0 || f.High < 0 {
		bad("value, low and high must be >= 0, got %+v", f)
	}
	if f.Low > 0 && f.High > 0 && f.Low > f.High {
		bad("low %g is above high %g", f.Low, f.High)
	}
	if f.HasInterval() && f.Value > 0 && (f.Value < f.Low || f.Value > f.High) {
		bad("value %g is outside its interval %g-%g", f.Value, f.Low, f.High)
	}
	switch f.Bound {
	case Exact, Approx:
		if !(f.Value > 0) {
			bad("a %q figure needs its value", f.boundName())
		}
		if (f.Low > 0) != (f.High > 0) {
			bad("an interval needs both low and high")
		}
	case Range:
		if !f.HasInterval() || f.Value != 0 {
			bad("a range gives low and high and no value")
		}
	case AtLeast:
		if !(f.Low > 0) || f.High != 0 || f.Value != 0 {
			bad("at_least gives low only")
		}
	case AtMost, Below:
		if !(f.High > 0) || f.Low != 0 || f.Value != 0 {
			bad("%s gives high only", f.Bound)
		}
	case Words:
		if f.Value != 0 || f.Low != 0 || f.High != 0 {
			bad("words gives no numbers")
		}
	default:
		bad("bound %q is unknown (known: approx, range, at_least, at_most, below, words, or none for an exact figure)", f.Bound)
	}
	return errs
}

func (f Figure) boundName() string {
	if f.Bound == Exact {
		return "exact"
	}
	return string(f.Bound)
}

// Limit is the part of the bar that limited a recipe's capacity.
type Limit string

// The limits the report names.
const (
	LimitTTFT          Limit = "ttft"
	LimitInteractivity Limit = "interactivity"
	LimitErrors        Limit = "errors"
	LimitNotReached    Limit = "not_reached" // every step run passed
	LimitUnknown       Limit = ""            // not published
)

// Target is a recipe's verdict at the target step (the results table's
// "Target 15" column).
type Target string

// The target verdicts the report prints.
const (
	TargetMissed   Target = "missed"    // ✗
	TargetTooClose Target = "too_close" // "too close": the interval touches the target
	TargetHeld     Target = "held"      // ✓
	TargetUnknown  Target = ""          // not published
)

// Setup is a recipe's topology as the recipes table describes it, for
// checking the run file that stands for it.
type Setup struct {
	Engine string `json:"engine"`
	Nodes  int    `json:"nodes"`
	// GPUs is what the recipe is priced on: nodes x 8.
	GPUs int `json:"gpus"`
	// Copies is the engines behind the router; with a prefill/decode split,
	// the decode copies.
	Copies int `json:"copies"`
	// PrefillEngines is the prefill engines of a prefill/decode split.
	PrefillEngines int `json:"prefill_engines,omitempty"`
	// Router names the report's router ("EndpointPicker"); empty for one
	// engine.
	Router string `json:"router,omitempty"`
	// ContextTokens is the served context.
	ContextTokens int `json:"context_tokens"`
	// HostCacheTiBPerNode is the pinned host RAM per node of a HiCache recipe.
	HostCacheTiBPerNode float64 `json:"host_cache_tib_per_node,omitempty"`
	// KVLink is how a split moves KV to the decode copies ("tcp").
	KVLink string `json:"kv_link,omitempty"`
	// From is where in the report the setup is read.
	From string `json:"from"`
}

// InFlight is what the report says of requests in flight per concurrent
// session.
type InFlight struct {
	// LightOverHeavy: light-only sessions keep more requests in flight
	// each than heavy-only ones.
	LightOverHeavy bool `json:"light_over_heavy"`
	// AtToday is requests in flight for today's mix at its 10 sessions.
	AtToday *Figure `json:"at_today,omitempty"`
	From    string  `json:"from"`
}

// Published is what the report published for one recipe. A nil figure was
// not published.
type Published struct {
	Recipe int `json:"recipe"`
	// Name is the recipe's short name: vllm, sglang, 128k, ...
	Name string `json:"name"`
	// Title is the recipe as the results table (or the recipes table)
	// names it.
	Title string `json:"title"`
	// RunFile is the run file that stands for it, next to the published file.
	RunFile string `json:"run_file"`
	Setup   Setup  `json:"setup"`
	// Dropped: the recipe failed early and has no row in the results table.
	Dropped bool `json:"dropped,omitempty"`
	// Capacity is the sessions held at the bar on today's mix, with its
	// 95% interval when printed.
	Capacity *Figure `json:"capacity,omitempty"`
	Limit    Limit   `json:"limit,omitempty"`
	Target   Target  `json:"target,omitempty"`
	// Stress is the stress step's outcome in words ("missed badly").
	Stress            string  `json:"stress,omitempty"`
	USDPerSessionHour *Figure `json:"usd_per_session_hour,omitempty"`
	USDPerMTok        *Figure `json:"usd_per_mtok,omitempty"`
	// Light and Heavy are the light-only and heavy-only capacities.
	Light *Figure `json:"light,omitempty"`
	Heavy *Figure `json:"heavy,omitempty"`
	// KVPeak is the KV cache's peak use, a share of it.
	KVPeak   *Figure   `json:"kv_peak,omitempty"`
	InFlight *InFlight `json:"in_flight,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
	// From says, field by field, where in the report each value is read.
	From map[string]string `json:"from"`
}

// Bar is the report's pass line, target and stress step.
type Bar struct {
	TTFTP90S            float64 `json:"ttft_p90_s"`
	InteractivityP90TPS float64 `json:"interactivity_p90_tps"`
	ErrorRate           float64 `json:"error_rate"`
	Target              int     `json:"target"`
	Stress              int     `json:"stress"`
	From                string  `json:"from"`
}

// Baseline is today's recipe on today's mix, which the bar was set from.
type Baseline struct {
	Sessions            int     `json:"sessions"`
	TTFTP90S            float64 `json:"ttft_p90_s"`
	InteractivityP90TPS float64 `json:"interactivity_p90_tps"`
	From                string  `json:"from"`
}

// Price is what the report's GPUs cost.
type Price struct {
	USDPerGPUHour  float64 `json:"usd_per_gpu_hour"`
	USDPerNodeHour float64 `json:"usd_per_node_hour"`
	GPUsPerNode    int     `json:"gpus_per_node"`
	From           string  `json:"from"`
}

// Tier is one row of the report's tiers table.
type Tier struct {
	Tier               string  `json:"tier"`
	MedianPromptTokens int     `json:"median_prompt_tokens"`
	P90PromptTokens    int     `json:"p90_prompt_tokens"`
	Over128K           float64 `json:"over_128k"`
	MedianAnswerTokens int     `json:"median_answer_tokens"`
	WithSubagents      float64 `json:"with_subagents"`
	From               string  `json:"from"`
}

// File is the published file: the report's bar, prices, tiers and every
// recipe's published results.
type File struct {
	Version  int         `json:"version"`
	Report   string      `json:"report"`
	Sources  []string    `json:"sources"`
	Bar      Bar         `json:"bar"`
	Baseline Baseline    `json:"baseline"`
	Price    Price       `json:"price"`
	Tiers    []Tier      `json:"tiers"`
	Recipes  []Published `json:"recipes"`
	Notes    []string    `json:"notes,omitempty"`
}

// Recipe returns recipe n's published results.
func (f File) Recipe(n int) (Published, bool) {
	for _, p := range f.Recipes {
		if p.Recipe == n {
			return p, true
		}
	}
	return Published{}, false
}

// Load reads and checks a published file.
func Load(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("read published results: %w", err)
	}
	return Parse(b, path)
}

// Parse decodes a published file strictly (unknown fields are errors) and
// checks it; name is used in errors.
func Parse(b []byte, name string) (File, error) {
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return File{}, fmt.Errorf("%s: %v (the fields are the internal/fidelity types)", name, err)
	}
	if err := f.Validate(); err != nil {
		return File{}, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// Validate checks every field and reports all problems at once, each
// naming its field.
func (f File) Validate() error {
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, field+": "+fmt.Sprintf(format, args...))
	}
	if f.Version != Version {
		bad("version", "this build reads version %d, the file says %d", Version, f.Version)
	}
	if !(f.Bar.TTFTP90S > 0) || !(f.Bar.InteractivityP90TPS > 0) || !(f.Bar.ErrorRate > 0 && f.Bar.ErrorRate < 1) || f.Bar.Target < 1 || f.Bar.Stress < f.Bar.Target {
		bad("bar", "needs ttft_p90_s, interactivity_p90_tps, an error_rate in (0, 1), a target and a stress step at or above it, got %+v", f.Bar)
	}
	if !(f.Price.USDPerGPUHour > 0) || f.Price.GPUsPerNode < 1 {
		bad("price", "needs usd_per_gpu_hour and gpus_per_node, got %+v", f.Price)
	}
	seen := map[int]bool{}
	for i, p := range f.Recipes {
		at := fmt.Sprintf("recipes[%d]", i)
		if seen[p.Recipe] {
			bad(at+".recipe", "recipe %d is listed twice", p.Recipe)
		}
		seen[p.Recipe] = true
		if p.Name == "" || p.Title == "" || p.RunFile == "" {
			bad(at, "recipe %d needs name, title and run_file", p.Recipe)
		}
		s := p.Setup
		if s.Engine == "" || s.Nodes < 1 || s.GPUs < 1 || s.Copies < 1 || s.ContextTokens < 1 || s.From == "" {
			bad(at+".setup", "needs engine, nodes, gpus, copies, context_tokens and from, got %+v", s)
		}
		if f.Price.GPUsPerNode > 0 && s.GPUs != s.Nodes*f.Price.GPUsPerNode {
			bad(at+".setup.gpus", "%d GPUs on %d nodes of %d", s.GPUs, s.Nodes, f.Price.GPUsPerNode)
		}
		for field, fig := range map[string]*Figure{
			"capacity": p.Capacity, "usd_per_session_hour": p.USDPerSessionHour, "usd_per_mtok": p.USDPerMTok,
			"light": p.Light, "heavy": p.Heavy, "kv_peak": p.KVPeak,
		} {
			if fig == nil {
				continue
			}
			errs = append(errs, fig.check(at+"."+field)...)
			if p.From[field] == "" {
				bad(at+".from."+field, "say where in the report the %s is read", field)
			}
		}
		if p.InFlight != nil && p.InFlight.From == "" {
			bad(at+".in_flight.from", "say where in the report it is read")
		}
		switch p.Limit {
		case LimitTTFT, LimitInteractivity, LimitErrors, LimitNotReached, LimitUnknown:
		default:
			bad(at+".limit", "unknown limit %q (known: ttft, interactivity, errors, not_reached)", p.Limit)
		}
		switch p.Target {
		case TargetMissed, TargetTooClose, TargetHeld, TargetUnknown:
		default:
			bad(at+".target", "unknown target verdict %q (known: missed, too_close, held)", p.Target)
		}
		if !p.Dropped && (p.Capacity == nil || p.Target == TargetUnknown) {
			bad(at, "recipe %d is in the results table: give its capacity and target verdict, or mark it dropped", p.Recipe)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	return errors.New("invalid published results:\n  " + strings.Join(errs, "\n  "))
}
