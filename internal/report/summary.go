package report

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// SummaryVersion is the version of summary.json (see upgrade.go for what
// each version added and how older ones are read).
const SummaryVersion = 2

// Summary is what a run found: the JSON of `headroom run --json`, the
// summary.json of the run directory, and the source of every rendering.
type Summary struct {
	Version    int                  `json:"version"`
	Recipe     Recipe               `json:"recipe"`
	Bar        verdict.Bar          `json:"bar"`
	Capacity   sweep.Capacity       `json:"capacity"`
	Target     *sweep.TargetVerdict `json:"target,omitempty"`
	Stress     *sweep.TargetVerdict `json:"stress,omitempty"`
	Phases     []Phase              `json:"phases,omitempty"`
	Cost       sweep.Cost           `json:"cost"`
	Steps      []Step               `json:"steps"`
	Missing    []string             `json:"missing_signals"`
	Warnings   []string             `json:"warnings"`
	StopReason string               `json:"stop_reason"`
	PostFlight sweep.PostFlight     `json:"post_flight"`
	RunDir     string               `json:"run_dir"`
	Started    string               `json:"started"`
	WallS      float64              `json:"wall_s"`
	TimeScale  float64              `json:"time_scale"`
	// Calibration is how many tokens the server makes of one placeholder word.
	Calibration *prompt.Calibration `json:"calibration,omitempty"`
	Versions    map[string]string   `json:"versions"`
	// Mix is the workload's share of each tier, when the run recorded it;
	// compare reads it to tell light-only and heavy-only runs apart.
	Mix *Mix `json:"mix,omitempty"`
	// OverContext is how many planned turns need more than the served
	// context, and how many were dropped for it; nil when the context was
	// not known or pre-flight did not get that far.
	OverContext *OverContext `json:"over_context,omitempty"`
	// Error is why the run ended in a rig error (a phase failed, the engine
	// was not idle after it, it was interrupted); empty when it finished.
	Error string `json:"error,omitempty"`
	// Blocked is why the recipe cannot be chosen whatever its capacity: a
	// mini eval suite failed with confidence before the sweep. Its targets
	// then read fail; empty when nothing blocked it.
	Blocked string `json:"blocked,omitempty"`
	// Mixes are the ladders of the other mixes a run swept beside its main
	// one (sweep.mixes after the first, e.g. light-only and heavy-only next
	// to today's), each with its own steps and capacity. The summary's own
	// Steps, Capacity and Mix are the main mix's. Empty for a run of one mix,
	// and in summaries written before runs swept several.
	Mixes []MixResult `json:"mixes,omitempty"`
}

// Block marks the recipe blocked for why, whatever its capacity: the
// target and stress verdicts, of every mix, read fail and say why.
// Capacity stays as measured.
func (s *Summary) Block(why string) {
	s.Blocked = why
	block := func(t *sweep.TargetVerdict) {
		if t != nil {
			t.Verdict, t.Blocked = verdict.Fail, why
		}
	}
	block(s.Target)
	block(s.Stress)
	for i := range s.Mixes {
		block(s.Mixes[i].Target)
	}
}

// MixResult is one mix's ladder in a run that swept several mixes.
type MixResult struct {
	// Name is the mix as the run file names it, e.g. "light".
	Name     string               `json:"name"`
	Mix      Mix                  `json:"mix"`
	Steps    []Step               `json:"steps"`
	Capacity sweep.Capacity       `json:"capacity"`
	Target   *sweep.TargetVerdict `json:"target,omitempty"`
	Cost     *sweep.Cost          `json:"cost,omitempty"`
	// StopReason is why this mix's ladder stopped.
	StopReason string `json:"stop_reason,omitempty"`
}

// Label is how a report names the mix: its kind (light-only, heavy-only)
// when it has one tier, else its name.
func (m MixResult) Label() string {
	if k := m.Mix.Kind(); k != MixMixed {
		return k
	}
	if m.Name != "" {
		return m.Name
	}
	return mixWords(&m.Mix)
}

// AsSummary is the mix's ladder as a summary of its own, under the run's
// recipe and bar, for the renderings that draw one ladder.
func (m MixResult) AsSummary(run Summary) Summary {
	s := Summary{Version: run.Version, Recipe: run.Recipe, Bar: run.Bar, Capacity: m.Capacity, Target: m.Target,
		Steps: m.Steps, StopReason: m.StopReason, RunDir: run.RunDir, Started: run.Started, TimeScale: run.TimeScale,
		Blocked: run.Blocked}
	mix := m.Mix
	s.Mix = &mix
	if m.Cost != nil {
		s.Cost = *m.Cost
	} else {
		s.Cost = sweep.Cost{USDPerHour: run.Cost.USDPerHour}
	}
	return s
}

// mainMixLabel names the summary's own mix beside its others.
func (s Summary) mainMixLabel() string {
	if s.Mix != nil {
		if k := s.Mix.Kind(); k != MixMixed {
			return k
		}
	}
	return "today's mix"
}

// MarshalJSON writes the summary; a run that judged no step measured no
// capacity, and its capacity is null.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	var c *sweep.Capacity
	if len(s.Steps) > 0 {
		c = &s.Capacity
	}
	return json.Marshal(struct {
		plain
		Capacity *sweep.Capacity `json:"capacity"`
	}{plain(s), c})
}

// OverContext is how the run's planned turns (the turns of every session
// its tiers may replay, subagents' included) fit the served context: a turn
// is over it when its prompt plus its max_tokens cap exceed it, as vLLM
// refuses it.
type OverContext struct {
	ContextTokens int    `json:"context_tokens"`
	Source        string `json:"source"` // where the context length was read
	// Skipped is workload.skip_over_context: the turns over the context and
	// the rest of their conversations were not sent.
	Skipped bool              `json:"skipped"`
	Tiers   []OverContextTier `json:"tiers"`
}

// OverContextTier is one tier's count of turns over the context.
type OverContextTier struct {
	Tier            string `json:"tier"`
	Turns           int    `json:"turns"`
	Over            int    `json:"over"`
	SubagentTurns   int    `json:"subagent_turns"`
	SubagentOver    int    `json:"subagent_over"`
	Dropped         int    `json:"dropped"` // turns not sent: those over and the rest of their conversations
	SubagentDropped int    `json:"subagent_dropped"`
}

// Lines says, one line per tier, how many turns were over the context and
// what became of them.
func (o OverContext) Lines() []string {
	var out []string
	for _, t := range o.Tiers {
		share := 0.0
		if t.Turns > 0 {
			share = 100 * float64(t.Over) / float64(t.Turns)
		}
		line := fmt.Sprintf("%s: %d of %d turns (%.1f%%) need more than the %d-token context (%s), %d of them subagent turns",
			t.Tier, t.Over, t.Turns, share, o.ContextTokens, o.Source, t.SubagentOver)
		if o.Skipped {
			line += fmt.Sprintf("; %d turns were dropped and never sent (%d subagent): those over the context and the rest of their conversations", t.Dropped, t.SubagentDropped)
		}
		out = append(out, line)
	}
	return out
}

// Mix is the share of each tier in a run's sessions.
type Mix struct {
	Heavy float64 `json:"heavy"`
	Light float64 `json:"light"`
}

// Kind names the mix for comparisons: "light-only" when no session is heavy,
// "heavy-only" when none is light, else "mix".
func (m Mix) Kind() string {
	switch {
	case m.Heavy <= 0 && m.Light > 0:
		return MixLightOnly
	case m.Light <= 0 && m.Heavy > 0:
		return MixHeavyOnly
	}
	return MixMixed
}

// The kinds of mix a comparison tells apart.
const (
	MixMixed     = "mix"
	MixLightOnly = "light-only"
	MixHeavyOnly = "heavy-only"
)

// Phase is one phase of a run and how it went.
type Phase struct {
	Name   string  `json:"name"`
	Status string  `json:"status"` // ok, failed, skipped
	TookS  float64 `json:"took_s"` // wall seconds
	Detail string  `json:"detail,omitempty"`
}

// Recipe is the part of the recipe a reader of the summary needs.
type Recipe struct {
	Name          string  `json:"name"`
	Engine        string  `json:"engine"`
	Nodes         int     `json:"nodes"`
	GPUsPerNode   int     `json:"gpus_per_node"`
	USDPerGPUHour float64 `json:"usd_per_gpu_hour"`
	Endpoint      string  `json:"endpoint"`
	Model         string  `json:"model"`
}

// Step is one judged step in the summary.
type Step struct {
	Sessions         int               `json:"sessions"`
	Verdict          verdict.Verdict   `json:"verdict"`
	TTFTP90          stats.Summary     `json:"ttft_p90"`
	InteractivityP90 stats.Summary     `json:"interactivity_p90"`
	ErrorRate        stats.Summary     `json:"error_rate"`
	Parts            []verdict.Part    `json:"parts"`
	Missing          []string          `json:"missing,omitempty"`
	Warnings         []string          `json:"warnings,omitempty"`
	Load             sweep.LoadSummary `json:"load"`
	Tokens           sweep.Tokens      `json:"tokens"`
	StartS           float64           `json:"start_s"` // modelled seconds since the run started; warm-up runs to MeasureStartS
	MeasureStartS    float64           `json:"measure_start_s"`
	EndS             float64           `json:"end_s"`
	Windows          int               `json:"windows"`
	// CacheReported says whether the server reported prefix-cache hits over
	// the step; a hit rate it does not report reads "not reported", not 0%.
	CacheReported bool `json:"cache_reported"`
}

// MarshalJSON writes the step with its values; a value that was not
// measured (a part that read no data) is null, never 0.
func (s Step) MarshalJSON() ([]byte, error) {
	type plain Step
	var parts []json.RawMessage
	for _, p := range s.Parts {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		if math.IsNaN(p.Value.Center) {
			if b, err = withValue(b, nullable(p.Value)); err != nil {
				return nil, err
			}
		}
		parts = append(parts, b)
	}
	return json.Marshal(struct {
		plain
		TTFTP90          valueJSON         `json:"ttft_p90"`
		InteractivityP90 valueJSON         `json:"interactivity_p90"`
		ErrorRate        valueJSON         `json:"error_rate"`
		Parts            []json.RawMessage `json:"parts"`
	}{plain(s), nullable(s.TTFTP90), nullable(s.InteractivityP90), nullable(s.ErrorRate), parts})
}

// UnmarshalJSON reads what MarshalJSON writes; null reads as no data.
func (s *Step) UnmarshalJSON(b []byte) error {
	type plain Step
	var j struct {
		plain
		TTFTP90          valueJSON         `json:"ttft_p90"`
		InteractivityP90 valueJSON         `json:"interactivity_p90"`
		ErrorRate        valueJSON         `json:"error_rate"`
		Parts            []json.RawMessage `json:"parts"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Step(j.plain)
	s.TTFTP90, s.InteractivityP90, s.ErrorRate = j.TTFTP90.summary(), j.InteractivityP90.summary(), j.ErrorRate.summary()
	s.Parts = nil
	for _, raw := range j.Parts {
		var p verdict.Part
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		var v struct {
			Value valueJSON `json:"value"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		p.Value = v.Value.summary()
		s.Parts = append(s.Parts, p)
	}
	return nil
}

// valueJSON is a value with its interval as summary.json writes it: a
// number, "+Inf" or "-Inf", or null where nothing was measured.
type valueJSON struct {
	Center     *stats.Number `json:"value"`
	Lo         *stats.Number `json:"lo"`
	Hi         *stats.Number `json:"hi"`
	Confidence float64       `json:"confidence"`
	Warnings   []string      `json:"warnings,omitempty"`
}

func nullable(s stats.Summary) valueJSON {
	num := func(v float64) *stats.Number {
		if math.IsNaN(v) {
			return nil
		}
		n := stats.Number(v)
		return &n
	}
	return valueJSON{num(s.Center), num(s.Lo), num(s.Hi), s.Confidence, s.Warnings}
}

func (v valueJSON) summary() stats.Summary {
	f := func(n *stats.Number) float64 {
		if n == nil {
			return math.NaN()
		}
		return float64(*n)
	}
	return stats.Summary{Center: f(v.Center), Lo: f(v.Lo), Hi: f(v.Hi), Confidence: v.Confidence, Warnings: v.Warnings}
}

// withValue replaces the "value" of a JSON object.
func withValue(obj []byte, v valueJSON) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m["value"] = b
	return json.Marshal(m)
}

// SetCacheReported records whether the server reported prefix-cache hits
// over the step.
func (s *Step) SetCacheReported(ok bool) { s.CacheReported = ok }

// CacheHit is the step's prefix-cache hit rate as people read it: a
// percentage, "not reported" when the server does not count hits, or "no
// data" when no prompt tokens were counted.
func (s Step) CacheHit() string {
	switch {
	case !s.CacheReported && s.Tokens.Cached <= 0:
		return "not reported"
	case s.Tokens.Prompt <= 0:
		return "no data"
	}
	return fmt.Sprintf("%.0f%%", 100*s.Tokens.Cached/s.Tokens.Prompt)
}

// StepOf flattens a sweep step for the summary.
func StepOf(s sweep.StepResult) Step {
	out := Step{
		Sessions: s.Sessions, Verdict: s.Judged.Verdict, Parts: s.Judged.Parts,
		Missing: s.Judged.Missing, Warnings: s.Judged.Warnings, Load: s.Load, Tokens: s.Tokens,
		StartS: s.Start, MeasureStartS: s.MeasureStart, EndS: s.End, Windows: s.Windows,
	}
	nan := stats.Summary{Center: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	out.TTFTP90, out.InteractivityP90, out.ErrorRate = nan, nan, nan
	out.CacheReported = s.Tokens.Cached > 0
	// a part that could not be measured has no value, never 0
	out.Parts = append([]verdict.Part(nil), s.Judged.Parts...)
	for i, p := range out.Parts {
		if p.Verdict == verdict.NoData {
			out.Parts[i].Value = stats.Summary{Center: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Warnings: p.Value.Warnings}
			out.Parts[i].Margin = math.NaN()
			p = out.Parts[i]
		}
		switch p.Name {
		case "ttft":
			out.TTFTP90 = p.Value
		case "interactivity":
			out.InteractivityP90 = p.Value
		case "errors":
			out.ErrorRate = p.Value
		}
	}
	return out
}

// Collect fills the run-wide lists of missing signals and warnings from the
// steps, without repeats, in a stable order.
func (s *Summary) Collect(extra []string) {
	miss := map[string]bool{}
	warn := map[string]bool{}
	for _, st := range s.Steps {
		for _, m := range st.Missing {
			miss[m] = true
		}
		for _, w := range st.AllWarnings() {
			warn[fmt.Sprintf("%d sessions: %s", st.Sessions, w)] = true
		}
	}
	for _, w := range extra {
		warn[w] = true
	}
	s.Missing, s.Warnings = keys(miss), keys(warn)
}

// AllWarnings are the step's warnings and its parts' (a few turns behind an
// error interval, a client TTFT far from the server's): everything that
// bears on its verdict, each once, the parts' named by part.
func (s Step) AllWarnings() []string {
	out := append([]string(nil), s.Warnings...)
	for _, p := range s.Parts {
		for _, w := range p.Value.Warnings {
			if line := p.Name + ": " + w; !slices.Contains(out, line) && !slices.Contains(out, w) {
				out = append(out, line)
			}
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
