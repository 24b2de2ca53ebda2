// Package config decodes, defaults and validates the run file: the recipe under
// test, the bar it must hold, the workload replayed against it and the sweep.
package config

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/upload"
)

// Version is the run-file schema version this build reads.
const Version = 1

// SimEndpoint is the recipe endpoint that selects the built-in simulated gateway.
const SimEndpoint = "sim"

// Run is one run file.
type Run struct {
	Version  int      `json:"version"`
	Recipe   Recipe   `json:"recipe"`
	Bar      Bar      `json:"bar"`
	Workload Workload `json:"workload"`
	Sweep    Sweep    `json:"sweep"`
	Evals    Evals    `json:"evals"`
	Notify   Notify   `json:"notify,omitempty"`
	// Deploy says what becomes of the candidate when the run is over
	// (recipe.deploy says how it is put up).
	Deploy Deploy `json:"deploy,omitempty"`
	// Canary, when set, is a canary on live traffic (headroom canary; see
	// canary.go): this recipe is the candidate.
	Canary *Canary `json:"canary,omitempty"`
	// TimeScale runs the clock this many times faster than modelled time, or
	// "virtual": modelled time jumps from event to event, so a simulated run
	// takes as long as its computation. Only the built-in simulator can
	// follow a scaled or virtual clock, so it must be 1 elsewhere.
	TimeScale Scale `json:"time_scale"`
	// Output is the folder under which run directories are made.
	Output string `json:"output"`
	// Report says where the finished run directory goes besides Output.
	Report Report `json:"report,omitempty"`
}

// Report is what becomes of a finished run directory.
type Report struct {
	// Upload copies it to an S3-compatible bucket.
	Upload upload.Config `json:"upload,omitempty"`
}

// Recipe is one serving setup and what it costs; it may live in its own
// file (recipe: {file: r.yaml}) so run files can share it.
type Recipe = recipe.Recipe

// SimSpec picks the built-in simulator's profile.
type SimSpec = recipe.SimSpec

// Bar is the pass line a step must hold.
type Bar struct {
	TTFTP90S            float64 `json:"ttft_p90_s"`
	InteractivityP90TPS float64 `json:"interactivity_p90_tps"`
	ErrorRate           float64 `json:"error_rate"`
	// ClientErrors counts errors as the client saw them when the server
	// reports no HTTP status counters (SGLang alone); the report says so.
	ClientErrors bool `json:"client_errors,omitempty"`
	// AllowPreemptions lets latency pass in a step whose engine preempted
	// requests for lack of KV cache or whose KV cache use reached
	// sweep.kv_limit; by default such a step reads too close.
	AllowPreemptions bool `json:"allow_preemptions,omitempty"`
}

// Workload says which sessions are replayed and how.
type Workload struct {
	// Traces is a trace file or folder, or "synth" for the built-in synthesiser.
	Traces        string `json:"traces"`
	SynthSessions int    `json:"synth_sessions"`
	// SynthColdResumes makes synthesised sessions resume some turns cold
	// after a pause, at the rate real Claude Code sessions do
	// (trace.SynthOptions.ColdResumes).
	SynthColdResumes bool    `json:"synth_cold_resumes,omitempty"`
	Seed             uint64  `json:"seed"`
	Mix              Mix     `json:"mix"`
	ThinkTime        string  `json:"think_time"`
	ThinkTimeCapS    float64 `json:"think_time_cap_s"`
	// RequestTimeoutS is each request's client deadline, in modelled seconds.
	RequestTimeoutS float64 `json:"request_timeout_s"`
	// PrimeTimeoutS bounds each lane's priming request; default the warm-up.
	PrimeTimeoutS float64 `json:"prime_timeout_s"`
	// MaxOverContext is the share of planned turns whose prompt may exceed
	// the served context before pre-flight stops the run (default 0.01; 0
	// allows none).
	MaxOverContext *float64 `json:"max_over_context,omitempty"`
	// Retry is how a lane retries what an agent retries (connect errors,
	// timeouts, 408/409/429/5xx), each try an error of its own.
	Retry Retry `json:"retry,omitempty"`
	// SkipOverContext drops the turns whose prompt exceeds the served
	// context instead of sending them (they would come back refused); the
	// report says how many were dropped.
	SkipOverContext bool `json:"skip_over_context,omitempty"`
}

// Retry is a lane's retry policy: attempts per turn (the first included),
// and waits from backoff_s doubling to backoff_max_s, with jitter;
// Retry-After is honoured up to backoff_max_s. Zero fields take the
// defaults: 4 attempts, 1 s, 30 s.
type Retry struct {
	Attempts    int     `json:"attempts,omitempty"`
	BackoffS    float64 `json:"backoff_s,omitempty"`
	BackoffMaxS float64 `json:"backoff_max_s,omitempty"`
}

// Mix is the share of each tier in the sessions.
type Mix struct {
	Heavy float64 `json:"heavy"`
	Light float64 `json:"light"`
}

// Sweep is the ladder of steps and how each is run and judged.
type Sweep struct {
	Ladder  []int   `json:"ladder"`
	WarmupS float64 `json:"warmup_s"`
	StepS   float64 `json:"step_s"`
	// MaxStepS is the longest a step's judged time may run: a step with a
	// part too close that more turns could decide goes on past step_s, up
	// to this and within gpu_window_min; default twice step_s; step_s
	// itself keeps every step fixed.
	MaxStepS float64 `json:"max_step_s,omitempty"`
	// WindowS is the width of one judged window; intervals bootstrap over windows.
	WindowS float64 `json:"window_s"`
	// ScrapeS is how often metrics are scraped; WindowS must be a multiple of it.
	ScrapeS float64 `json:"scrape_s"`
	// Target is the step that must pass for the recipe to hold its target.
	Target int `json:"target,omitempty"`
	// DrainS bounds how long the run waits for the engine to be idle at the end.
	DrainS    float64 `json:"drain_s"`
	Seed      uint64  `json:"seed"`
	Resamples int     `json:"resamples"`
	// Mode is "ladder" (climb the steps in order) or "adaptive" (double from
	// the first step until one misses, then bisect within the ladder's range).
	Mode string `json:"mode"`
	// Resolution is how close, in sessions, adaptive mode brackets the crossing.
	Resolution int `json:"resolution,omitempty"`
	// Stress is the stress step: its verdict is reported beside the target's.
	Stress int `json:"stress,omitempty"`
	// Repeat re-runs the steps either side of the crossing (default true).
	Repeat *bool `json:"repeat,omitempty"`
	// Mixes sweeps the ladder once per mix: "today" (workload.mix), "light"
	// (light sessions only) and "heavy" (heavy only). The first is the run's
	// own; each other runs after it in a run directory of its own under
	// mixes/ and joins the summary with its capacity. Empty: workload.mix
	// alone.
	Mixes []string `json:"mixes,omitempty"`
	// Kill ends a step early when the recipe clearly cannot carry it.
	Kill Kill `json:"kill"`
	// KVFull stops the sweep after a step whose KV cache use averaged at
	// least this share (or sat at it while requests waited); 0 turns that
	// off. What keeps latency from passing near a full cache is KVLimit.
	KVFull float64 `json:"kv_full"`
	// KVLimit keeps latency from passing in a step whose KV cache use
	// reached this share in any scrape of its judged windows: the engine
	// is at its limit, where another draw of sessions tips it into
	// preempting (bar.allow_preemptions lifts that). Default 0.96, below
	// kv_full: on the built-in simulator the steps that read pass against
	// a truth beyond the bar had peaked at 96.4-97.2%, those truly within
	// it at up to 95% (docs/statistics.md, "A KV cache that filled").
	KVLimit float64 `json:"kv_limit"`
	// GPUWindowMin is the GPU time the recipe gets, rollout and rollback
	// included; the plan must fit in it.
	GPUWindowMin float64 `json:"gpu_window_min"`
	// BootstrapBlock resamples runs of this many neighbouring windows
	// (moving-block bootstrap) instead of single windows, for windows that
	// are not independent; 1 is the plain bootstrap; 0 (the default) picks
	// the length from the step's windows (stats.AutoBlockLength: as long as
	// neighbouring windows are alike, never below n^(1/3), at least 2 from 8
	// windows, at most n/3).
	BootstrapBlock int `json:"bootstrap_block"`
	// ReadyTimeoutS is how long pre-flight waits, in modelled seconds, for
	// an endpoint that is still starting (connection refused, 503 while the
	// model loads) before it gives up; default 180.
	ReadyTimeoutS float64 `json:"ready_timeout_s,omitempty"`
	// Shards splits each step's lanes over this many headroom processes
	// (shards.go, docs/sweep.md "Sharded load"); 0 or 1: one process.
	Shards int `json:"shards,omitempty"`
	// Shard says how the shards find each other.
	Shard Shard `json:"shard,omitzero"`
}

// Notify says where a run posts each phase's and step's numbers as they come.
type Notify struct {
	// Webhook is a Slack-compatible incoming-webhook URL.
	Webhook string `json:"webhook,omitempty"`
	// GitHub keeps one comment on a pull request up to date with the run.
	GitHub *GitHub `json:"github,omitempty"`
}

// Evals are the mini evals: before the sweep as a smoke test, and during it
// as a share of each step's requests.
type Evals struct {
	// Suites names built-in suites: tool_calling, long_context_readback.
	Suites []string `json:"suites"`
	// Custom lists JSONL files of custom cases.
	Custom []string `json:"custom,omitempty"`
	// Threshold is the pass rate a suite must not be confidently below.
	Threshold float64 `json:"threshold"`
	// ContextLen is how deep read-back plants its fact, in tokens; default
	// recipe.max_model_len, else 131072.
	ContextLen int `json:"context_len,omitempty"`
	// UnderLoadShare is the share of each step's requests sent as tool-call
	// eval requests; 0 turns evals under load off.
	UnderLoadShare float64 `json:"under_load_share"`
	// ToolCallMaxShare is the bar part for evals under load: the share of tool
	// calls that may fail their schema.
	ToolCallMaxShare float64 `json:"tool_call_max_share"`
	// TimeoutS is each eval request's deadline, in modelled seconds.
	TimeoutS float64 `json:"timeout_s"`
	// StopOnFail ends the run when a suite fails with confidence before the
	// sweep, sparing the window. By default the sweep still measures capacity
	// and the failed suite blocks the recipe: its target reads fail, whatever
	// the capacity, and it is never promoted or ranked.
	StopOnFail bool `json:"stop_on_fail,omitempty"`
}

// Kill is the kill switch's limits; 0 turns a limit off.
type Kill struct {
	QueuePerSession float64 `json:"queue_per_session"`
	ErrorRate       float64 `json:"error_rate"`
	TTFTFactor      float64 `json:"ttft_factor"`
}

// MaxOver is workload.max_over_context with its default.
func (w Workload) MaxOver() float64 {
	if w.MaxOverContext == nil {
		return 0.01
	}
	return *w.MaxOverContext
}

// RepeatCrossing reports whether the steps either side of the crossing run twice.
func (s Sweep) RepeatCrossing() bool { return s.Repeat == nil || *s.Repeat }

//go:embed default.yaml
var defaultYAML []byte

// Default is the built-in run: the simulated gateway, a synthesised half-heavy,
// half-light mix and the reference report's bar.
func Default() Run {
	r, err := Parse(defaultYAML, "built-in default")
	if err != nil {
		panic("the built-in default run file is invalid: " + err.Error())
	}
	return r
}

// DefaultYAML is the text of the built-in run file, for users to start from.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Load reads and validates a run file.
func Load(path string) (Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Run{}, fmt.Errorf("read run file: %w", err)
	}
	return Parse(b, path)
}

// Parse decodes a run file strictly (unknown fields are errors), fills
// defaults and validates every field. name is used in errors. The error
// is an *Errors listing every problem with its line (see position.go).
func Parse(b []byte, name string) (Run, error) {
	return parse(b, name, true, nil)
}

func (r *Run) fillDefaults() {
	if r.Version == 0 {
		r.Version = Version
	}
	if r.TimeScale == 0 {
		r.TimeScale = 1
	}
	if r.Output == "" {
		r.Output = "runs"
	}
	if r.Recipe.Mapping == "" {
		r.Recipe.Mapping = "vllm"
	}
	if r.Recipe.Engine == "" && r.Recipe.Endpoint == SimEndpoint {
		r.Recipe.Engine = "vllm"
	}
	w := &r.Workload
	if w.Traces == "" {
		w.Traces = "synth"
	}
	if w.SynthSessions == 0 {
		w.SynthSessions = 200
	}
	if w.Mix == (Mix{}) {
		w.Mix = Mix{Heavy: 0.5, Light: 0.5}
	}
	if w.ThinkTime == "" {
		w.ThinkTime = "capped"
	}
	if w.ThinkTimeCapS == 0 {
		w.ThinkTimeCapS = 5
	}
	if w.RequestTimeoutS == 0 {
		w.RequestTimeoutS = 600
	}
	if w.MaxOverContext == nil {
		share := 0.01
		w.MaxOverContext = &share
	}
	e := &r.Evals
	if e.Threshold == 0 {
		e.Threshold = 0.9
	}
	if e.ContextLen == 0 {
		e.ContextLen = r.Recipe.MaxModelLen
		if e.ContextLen == 0 {
			e.ContextLen = 131072
		}
	}
	if e.ToolCallMaxShare == 0 {
		e.ToolCallMaxShare = 0.02
	}
	if e.TimeoutS == 0 {
		e.TimeoutS = 300
	}
	s := &r.Sweep
	if w.PrimeTimeoutS == 0 {
		w.PrimeTimeoutS = s.WarmupS
		if w.PrimeTimeoutS == 0 {
			w.PrimeTimeoutS = w.RequestTimeoutS
		}
	}
	if s.WindowS == 0 {
		s.WindowS = 60
	}
	if s.ScrapeS == 0 {
		s.ScrapeS = 5
	}
	if s.DrainS == 0 {
		s.DrainS = 300
	}
	if s.Resamples == 0 {
		s.Resamples = 2000
	}
	if s.Mode == "" {
		s.Mode = "ladder"
	}
	if s.Resolution == 0 {
		s.Resolution = 1
	}
	if s.Kill == (Kill{}) {
		s.Kill = Kill{QueuePerSession: 4, ErrorRate: 0.5, TTFTFactor: 4}
	}
	if s.KVFull == 0 {
		s.KVFull = 0.98
	}
	if s.KVLimit == 0 {
		s.KVLimit = 0.96
	}
	if s.GPUWindowMin == 0 {
		s.GPUWindowMin = 120
	}
	if s.ReadyTimeoutS == 0 {
		s.ReadyTimeoutS = 180
	}
	if s.MaxStepS == 0 {
		s.MaxStepS = 2 * s.StepS
	}
	if r.Canary != nil {
		r.Canary.fillDefaults()
	}
	if g := r.Notify.GitHub; g != nil && g.TokenEnv == "" {
		g.TokenEnv = "GITHUB_TOKEN"
	}
}

// validateGPUs checks the GPUs a recipe runs on and their price. The built-in
// simulator sizes its engines from them, so it needs both; a real endpoint
// may leave both 0 ("GPUs not stated": capacity is stated without hardware
// nobody named, and cost is not priced), but not one of them, and a price
// per GPU-hour needs the GPUs it is per.
func validateGPUs(rc Recipe, bad func(field, format string, args ...any)) {
	stated := rc.Nodes != 0 || rc.GPUsPerNode != 0
	if rc.Endpoint == SimEndpoint || stated {
		how := "the built-in simulator sizes its engines from nodes x gpus_per_node"
		if rc.Endpoint != SimEndpoint {
			how = "give both, or neither (0: GPUs not stated, --gpus unset)"
		}
		if rc.Nodes < 1 {
			bad("recipe.nodes", "must be at least 1, got %d: %s", rc.Nodes, how)
		}
		if rc.GPUsPerNode < 1 {
			bad("recipe.gpus_per_node", "must be at least 1, got %d: %s", rc.GPUsPerNode, how)
		}
	}
	switch {
	case rc.USDPerGPUHour < 0 || math.IsNaN(rc.USDPerGPUHour) || math.IsInf(rc.USDPerGPUHour, 0):
		bad("recipe.usd_per_gpu_hour", "must be >= 0 (0: not priced), got %g", rc.USDPerGPUHour)
	case rc.USDPerGPUHour > 0 && !stated:
		bad("recipe.usd_per_gpu_hour", "is %g, but the recipe states no GPUs to price: set recipe.nodes and recipe.gpus_per_node (--gpus N), or leave the price 0 (not priced)", rc.USDPerGPUHour)
	}
}

// Validate checks every field and reports all problems at once, each naming
// its field.
func (r Run) Validate() error {
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, field+": "+fmt.Sprintf(format, args...))
	}
	if r.Version != Version {
		bad("version", "this build reads version %d, the file says %d", Version, r.Version)
	}
	seenMix := map[string]bool{}
	for i, m := range r.Sweep.Mixes {
		if _, ok := MixNamed(m, r.Workload.Mix); !ok {
			bad(fmt.Sprintf("sweep.mixes[%d]", i), "%q is not a mix: use today (workload.mix), light or heavy", m)
		}
		if seenMix[m] {
			bad(fmt.Sprintf("sweep.mixes[%d]", i), "%q is named twice", m)
		}
		seenMix[m] = true
	}
	if err := r.Report.Upload.Validate("report.upload"); err != nil {
		errs = append(errs, strings.Split(err.Error(), "\n")...)
	}
	if !r.TimeScale.Virtual() && (r.TimeScale <= 0 || r.TimeScale > 1000) {
		bad("time_scale", "must be in (0, 1000] or \"virtual\", got %g", r.TimeScale)
	}
	rc := r.Recipe
	if rc.Name == "" {
		bad("recipe.name", "is required (it names the run directory)")
	} else if strings.ContainsAny(rc.Name, `/\ `) {
		bad("recipe.name", "%q must not contain slashes or spaces", rc.Name)
	}
	validateGPUs(rc, bad)
	if rc.Model == "" {
		bad("recipe.model", "is required: the model id the endpoint serves")
	}
	switch rc.Mapping {
	case "vllm", "sglang", "modelplane", "gen_ai":
	default:
		bad("recipe.mapping", "unknown mapping %q (known: vllm, sglang, modelplane, gen_ai)", rc.Mapping)
	}
	if rc.MappingFile != "" {
		if _, err := os.Stat(rc.Path(rc.MappingFile)); err != nil {
			bad("recipe.mapping_file", "%v", err)
		}
	}
	if err := rc.Validate(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasSuffix(line, ":") {
				errs = append(errs, "recipe."+line)
			}
		}
	}
	if rc.Endpoint == SimEndpoint {
		if len(rc.Metrics) > 0 {
			bad("recipe.metrics", "must be empty with the built-in simulator, which serves its own")
		}
		if p := rc.Sim.Personality; p != "" && p != "vllm" && p != "sglang" {
			bad("recipe.sim.personality", "must be vllm or sglang, got %q", p)
		}
		_, layoutErrs := SimLayoutOf(rc)
		switch strings.ReplaceAll(rc.Router, "-", "_") {
		case "", "round_robin", "least_loaded", "prefix_affinity":
		default:
			bad("recipe.router", "the simulator routes round_robin, least_loaded or prefix_affinity, not %q", rc.Router)
		}
		errs = append(errs, layoutErrs...)
	} else {
		if err := checkURL(rc.Endpoint); err != nil {
			bad("recipe.endpoint", "%v; use the server's base URL, e.g. http://127.0.0.1:8000, or %q for the built-in simulator", err, SimEndpoint)
		}
		if len(rc.Metrics) == 0 && rc.Prometheus == nil && (rc.Discovery == nil || rc.Discovery.Kubernetes == nil) {
			bad("recipe.metrics", "name at least one /metrics URL, a recipe.prometheus server or recipe.discovery: verdicts come only from what the server reports")
		}
		for i, m := range rc.Metrics {
			if err := checkURL(m); err != nil {
				bad(fmt.Sprintf("recipe.metrics[%d]", i), "%v", err)
			}
		}
		errs = append(errs, checkAccess(rc)...)
		if r.TimeScale != 1 {
			bad("time_scale", "must be 1 against a real endpoint (only the built-in simulator runs on a scaled or virtual clock)")
		}
	}
	b := r.Bar
	if b.TTFTP90S <= 0 {
		bad("bar.ttft_p90_s", "must be > 0 seconds, got %g", b.TTFTP90S)
	}
	if b.InteractivityP90TPS <= 0 {
		bad("bar.interactivity_p90_tps", "must be > 0 tokens/s per user, got %g", b.InteractivityP90TPS)
	}
	if b.ErrorRate <= 0 || b.ErrorRate >= 1 {
		bad("bar.error_rate", "must be a fraction in (0, 1), e.g. 0.02 for 2%%, got %g", b.ErrorRate)
	}
	w := r.Workload
	if w.Traces != "synth" {
		if _, err := os.Stat(w.Traces); err != nil {
			bad("workload.traces", "%v; give a trace file or folder, or \"synth\"", err)
		}
	}
	if w.SynthSessions < 4 {
		bad("workload.synth_sessions", "must be at least 4 (a quarter of them make each tier), got %d", w.SynthSessions)
	}
	if w.Mix.Heavy < 0 || w.Mix.Light < 0 || w.Mix.Heavy+w.Mix.Light <= 0 {
		bad("workload.mix", "shares must be >= 0 and not both 0, got heavy %g light %g", w.Mix.Heavy, w.Mix.Light)
	}
	switch w.ThinkTime {
	case "none", "recorded", "capped":
	default:
		bad("workload.think_time", "must be none, recorded or capped, got %q", w.ThinkTime)
	}
	if w.ThinkTimeCapS < 0 {
		bad("workload.think_time_cap_s", "must be >= 0, got %g", w.ThinkTimeCapS)
	}
	if w.RequestTimeoutS <= 0 {
		bad("workload.request_timeout_s", "must be > 0: every request carries a deadline, got %g", w.RequestTimeoutS)
	}
	if rt := w.Retry; rt.Attempts < 0 || rt.BackoffS < 0 || rt.BackoffMaxS < 0 || (rt.BackoffMaxS > 0 && rt.BackoffS > rt.BackoffMaxS) {
		bad("workload.retry", "attempts, backoff_s and backoff_max_s must be >= 0 (0 takes the default) and backoff_s at most backoff_max_s, got %+v", rt)
	}
	if m := w.MaxOverContext; m != nil && (*m < 0 || *m >= 1) {
		bad("workload.max_over_context", "must be a share in [0, 1), e.g. 0.01 for 1%%, got %g", *m)
	}
	if w.PrimeTimeoutS < 0 {
		bad("workload.prime_timeout_s", "must be > 0, got %g", w.PrimeTimeoutS)
	}
	if r.Notify.Webhook != "" {
		if err := checkURL(r.Notify.Webhook); err != nil {
			bad("notify.webhook", "%v", err)
		}
	}
	errs = append(errs, r.checkGitHub()...)
	errs = append(errs, r.checkDeploy()...)
	errs = append(errs, r.checkCanary()...)
	e := r.Evals
	for i, name := range e.Suites {
		if name != "tool_calling" && name != "long_context_readback" {
			bad(fmt.Sprintf("evals.suites[%d]", i), "unknown suite %q (built in: tool_calling, long_context_readback)", name)
		}
	}
	for i, f := range e.Custom {
		if _, err := os.Stat(f); err != nil {
			bad(fmt.Sprintf("evals.custom[%d]", i), "%v", err)
		}
	}
	if e.Threshold <= 0 || e.Threshold >= 1 {
		bad("evals.threshold", "must be a pass rate in (0, 1), got %g", e.Threshold)
	}
	if e.ContextLen < 0 {
		bad("evals.context_len", "must be >= 0 tokens, got %d", e.ContextLen)
	}
	if e.UnderLoadShare < 0 || e.UnderLoadShare > 0.5 {
		bad("evals.under_load_share", "must be a share in [0, 0.5], got %g", e.UnderLoadShare)
	}
	if e.ToolCallMaxShare <= 0 || e.ToolCallMaxShare >= 1 {
		bad("evals.tool_call_max_share", "must be a share in (0, 1), got %g", e.ToolCallMaxShare)
	}
	if e.TimeoutS <= 0 {
		bad("evals.timeout_s", "must be > 0: every eval request carries a deadline, got %g", e.TimeoutS)
	}
	s := r.Sweep
	if len(s.Ladder) == 0 {
		bad("sweep.ladder", "list the concurrent sessions of each step, e.g. [5, 10, 15, 20]")
	}
	for i, n := range s.Ladder {
		if n < 1 {
			bad(fmt.Sprintf("sweep.ladder[%d]", i), "must be at least 1 session, got %d", n)
		}
		if i > 0 && n <= s.Ladder[i-1] {
			bad(fmt.Sprintf("sweep.ladder[%d]", i), "must be larger than the step before (%d), got %d", s.Ladder[i-1], n)
		}
	}
	if s.WarmupS < 0 {
		bad("sweep.warmup_s", "must be >= 0, got %g", s.WarmupS)
	}
	if s.ScrapeS <= 0 {
		bad("sweep.scrape_s", "must be > 0, got %g", s.ScrapeS)
	}
	if s.WindowS <= 0 {
		bad("sweep.window_s", "must be > 0, got %g", s.WindowS)
	} else if s.ScrapeS > 0 && !isMultiple(s.WindowS, s.ScrapeS) {
		bad("sweep.window_s", "must be a whole multiple of sweep.scrape_s (%g), got %g", s.ScrapeS, s.WindowS)
	}
	if s.StepS <= 0 {
		bad("sweep.step_s", "must be > 0, got %g", s.StepS)
	} else if s.WindowS > 0 && s.StepS < 3*s.WindowS {
		bad("sweep.step_s", "must hold at least 3 windows of sweep.window_s (%g s) so intervals can be bootstrapped, got %g", s.WindowS, s.StepS)
	}
	if s.MaxStepS < s.StepS {
		bad("sweep.max_step_s", "must be at least sweep.step_s (%g s; equal keeps every step fixed), got %g", s.StepS, s.MaxStepS)
	}
	if s.Target != 0 && !contains(s.Ladder, s.Target) && s.Mode == "ladder" {
		bad("sweep.target", "%d is not a step of sweep.ladder", s.Target)
	}
	if s.DrainS <= 0 {
		bad("sweep.drain_s", "must be > 0, got %g", s.DrainS)
	}
	switch s.Mode {
	case "ladder", "adaptive":
	default:
		bad("sweep.mode", "must be ladder or adaptive, got %q", s.Mode)
	}
	if s.Resolution < 1 {
		bad("sweep.resolution", "must be at least 1 session, got %d", s.Resolution)
	}
	if s.Mode == "adaptive" && len(s.Ladder) < 2 {
		bad("sweep.ladder", "adaptive mode needs the lowest and highest sessions to search between, e.g. [5, 40]")
	}
	if s.Stress != 0 && !contains(s.Ladder, s.Stress) && s.Mode == "ladder" {
		bad("sweep.stress", "%d is not a step of sweep.ladder", s.Stress)
	}
	if s.Kill.QueuePerSession < 0 || s.Kill.ErrorRate < 0 || s.Kill.ErrorRate > 1 || s.Kill.TTFTFactor < 0 || (s.Kill.TTFTFactor > 0 && s.Kill.TTFTFactor < 1) {
		bad("sweep.kill", "limits must be >= 0 (0 turns one off), error_rate at most 1 and ttft_factor at least 1, got %+v", s.Kill)
	}
	if s.KVFull < 0 || s.KVFull > 1 {
		bad("sweep.kv_full", "must be a share in [0, 1], got %g", s.KVFull)
	}
	if s.KVLimit < 0 || s.KVLimit > 1 {
		bad("sweep.kv_limit", "must be a share in [0, 1], got %g", s.KVLimit)
	}
	if s.GPUWindowMin < 0 {
		bad("sweep.gpu_window_min", "must be > 0 minutes, got %g", s.GPUWindowMin)
	}
	if s.BootstrapBlock < 0 {
		bad("sweep.bootstrap_block", "must be 0 (from the windows) or at least 1 window, got %d", s.BootstrapBlock)
	} else if s.BootstrapBlock > 0 && s.StepS > 0 && s.WindowS > 0 && float64(s.BootstrapBlock) > s.StepS/s.WindowS/2 {
		bad("sweep.bootstrap_block", "%d windows is more than half the %g windows of a step", s.BootstrapBlock, s.StepS/s.WindowS)
	}
	if s.ReadyTimeoutS < 0 {
		bad("sweep.ready_timeout_s", "must be > 0 seconds (how long pre-flight waits for a starting endpoint), got %g", s.ReadyTimeoutS)
	}
	validateShards(&r, bad)
	if s.Resamples < 100 {
		bad("sweep.resamples", "must be at least 100, got %d", s.Resamples)
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	return errors.New("invalid run file:\n  " + strings.Join(errs, "\n  "))
}

func checkURL(s string) error {
	if s == "" {
		return errors.New("is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q must be an http:// or https:// URL with a host", s)
	}
	return nil
}

func isMultiple(a, b float64) bool {
	q := a / b
	r := q - float64(int64(q+0.5))
	return q >= 1 && r < 1e-9 && r > -1e-9
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// MixNamed is the mix a sweep.mixes name stands for: today is the
// workload's own mix.
func MixNamed(name string, today Mix) (Mix, bool) {
	switch name {
	case "today":
		return today, true
	case "light":
		return Mix{Light: 1}, true
	case "heavy":
		return Mix{Heavy: 1}, true
	}
	return Mix{}, false
}
