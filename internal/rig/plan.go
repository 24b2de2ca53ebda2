package rig

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// Plan is the dry plan of a run: what it will do and how long it will take,
// without sending load.
type Plan struct {
	Recipe      string       `json:"recipe"`
	Phases      []PlanPhase  `json:"phases"`
	Steps       []PlanStep   `json:"steps"`
	Signals     []PlanSignal `json:"signals"`
	Minutes     float64      `json:"minutes"`      // modelled minutes, worst case
	GPUs        int          `json:"gpus"`         // nodes x GPUs per node; 0: not stated (a real endpoint given no --gpus)
	GPUMinutes  float64      `json:"gpu_minutes"`  // minutes x GPUs
	WindowMin   float64      `json:"window_min"`   // the GPU window the recipe gets
	Fits        bool         `json:"fits"`         // minutes <= window
	WallMinutes float64      `json:"wall_minutes"` // minutes / time scale
	Notes       []string     `json:"notes,omitempty"`
	// Under the step-length rule (a step runs past step_s, up to
	// max_step_s within the window, while its too-close parts could still
	// be decided): StepLength holds the expected and worst-case minutes.
	StepLength StepLength `json:"step_length"`
	// OverContext counts the planned turns over the context, when it is
	// known without asking the server (recipe.max_model_len, the simulator).
	OverContext *report.OverContext `json:"over_context,omitempty"`
}

// StepLength is what the step-length rule may add to the run. Expected:
// each step runs as long as its error part needs turns to clear the bar
// with no errors (from the requests expected), and the step at the
// crossing to max_step_s. Worst: every step, repeats included, to
// max_step_s, and no further than the sweep's share of the window allows.
type StepLength struct {
	MaxStepS           float64 `json:"max_step_s"`
	TurnsForErrors     int     `json:"turns_for_errors"` // 0 errors in this many turns clear the error bar
	ExpectedMinutes    float64 `json:"expected_minutes"`
	ExpectedGPUMinutes float64 `json:"expected_gpu_minutes"`
	WorstMinutes       float64 `json:"worst_minutes"`
	WorstGPUMinutes    float64 `json:"worst_gpu_minutes"`
}

// stepLength works out StepLength for a plan whose fixed-step run takes
// fixedMin minutes, sweepMin of them the sweep's.
func stepLength(cfg config.Run, steps []PlanStep, repeats int, fixedMin, sweepMin float64, gpus int) StepLength {
	sw := cfg.Sweep
	maxS := math.Max(sw.MaxStepS, sw.StepS)
	out := StepLength{MaxStepS: maxS, TurnsForErrors: turnsToClear(cfg.Bar.ErrorRate)}
	look := math.Max(1, math.Ceil(sw.StepS/2/sw.WindowS)) * sw.WindowS
	var errExt, mostExt float64 // seconds
	for _, st := range steps {
		judged := sw.StepS
		if st.Requests < out.TurnsForErrors {
			need := math.Inf(1)
			if st.Requests > 0 {
				need = sw.StepS * float64(out.TurnsForErrors) / float64(st.Requests)
			}
			// extended only when the limit can reach the turns needed
			if need <= maxS {
				judged = sw.StepS + math.Ceil((need-sw.StepS)/look)*look
			}
		}
		errExt += math.Min(judged, maxS) - sw.StepS
		mostExt = math.Max(mostExt, maxS-math.Min(judged, maxS))
	}
	// the sweep never extends a step past its share of the window
	// (the fixed run's phases, mini evals included, are all it leaves)
	room := math.Max(0, math.Min(sweepBudget(cfg).Minutes()-sweepMin, cfg.Sweep.GPUWindowMin-fixedMin))
	expected := math.Min((errExt+mostExt)/60, room)
	worst := math.Min(float64(len(steps)+repeats)*(maxS-sw.StepS)/60, room)
	out.ExpectedMinutes, out.WorstMinutes = fixedMin+expected, fixedMin+worst
	out.ExpectedGPUMinutes, out.WorstGPUMinutes = out.ExpectedMinutes*float64(gpus), out.WorstMinutes*float64(gpus)
	return out
}

// turnsToClear is the fewest turns in which 0 errors have a 95% Wilson
// upper bound under bar (about 189 for 2%).
func turnsToClear(bar float64) int {
	for n := 1; n < 1e7; n++ {
		if _, hi := stats.Wilson(0, n, 0.95); hi < bar {
			return n
		}
	}
	return 0
}

// PlanPhase is one phase's worst-case duration.
type PlanPhase struct {
	Name    string  `json:"name"`
	Minutes float64 `json:"minutes"`
	What    string  `json:"what"`
}

// PlanStep is one step of the ladder.
type PlanStep struct {
	Sessions int     `json:"sessions"`
	WarmupS  float64 `json:"warmup_s"`
	StepS    float64 `json:"step_s"`
	Requests int     `json:"requests_expected"`
	Role     string  `json:"role,omitempty"` // target, stress
}

// PlanSignal is a signal the bar needs and where it will come from.
type PlanSignal struct {
	Signal  string   `json:"signal"`
	Part    string   `json:"part"`
	Sources []string `json:"sources"`
}

// Pre-flight and rollback have no load to size them by: these are the
// planning allowances, from the reference report's ~2 minutes of pre-flight.
const (
	preflightMin = 2.0
	rollbackMin  = 5.0
)

// evalCaseS is the planning allowance for one mini-eval case, in modelled
// seconds: one request, as long as a typical agent turn's API time (the
// figure meanTurnSeconds takes for a turn whose traces record none). Each
// case is bounded by evals.timeout_s, which only stops a hang.
const evalCaseS = 10.0

// planEvals is the mini-eval phase's minutes and description, from the
// configured suites' case counts (the cases run one at a time).
func planEvals(cfg config.Run) (float64, string, error) {
	suites, err := Suites(cfg.Evals)
	if err != nil {
		return 0, "", err
	}
	total := 0
	var each []string
	for _, s := range suites {
		n := len(s.Cases(cfg.Workload.Seed))
		total += n
		each = append(each, fmt.Sprintf("%s %d", s.Name(), n))
	}
	if total == 0 {
		return 0, "no eval suites configured", nil
	}
	return float64(total) * evalCaseS / 60, fmt.Sprintf("%d cases one at a time (%s), %.0fs allowed a case, each cut off at %.0fs",
		total, strings.Join(each, ", "), evalCaseS, cfg.Evals.TimeoutS), nil
}

// adaptiveSteps is what an adaptive sweep may run: the sessions of its
// longest climb and bisection (sweep.AdaptivePath, the sweep's own
// sequence), and the words for them. The ladder gives its first and last
// step; the steps between are the bisection's, not the ladder's.
func adaptiveSteps(sw config.Sweep) ([]int, string) {
	path, capacity := sweep.AdaptivePath(sw.Ladder, sw.Resolution)
	top := sw.Ladder[len(sw.Ladder)-1]
	return path, fmt.Sprintf("adaptive: %d sessions first, doubling up to %d until a step fails, then halving the gap between the highest step that held and the lowest that failed until they are %d apart: at most %d steps of %.0fs warm-up + %.0fs judged (those below, for a capacity of %d)",
		sw.Ladder[0], top, sw.Resolution, len(path), sw.WarmupS, sw.StepS, capacity)
}

// sweepBudget is the sweep's share of the GPU window: the window less the
// allowances for pre-flight, post-flight's drain and rollback. No step is
// extended past it.
func sweepBudget(cfg config.Run) time.Duration {
	rest := preflightMin + cfg.Sweep.DrainS/60
	if cfg.Recipe.Endpoint != config.SimEndpoint {
		rest += rollbackMin
	}
	// at least 1 ns: 0 would mean no bound at all
	return max(time.Nanosecond, time.Duration((cfg.Sweep.GPUWindowMin-rest)*float64(time.Minute)))
}

// MakePlan works out the dry plan of a run file.
func MakePlan(cfg config.Run) (Plan, error) {
	sessions, err := BuildSessions(cfg.Workload)
	if err != nil {
		return Plan{}, err
	}
	turnS := meanTurnSeconds(cfg, sessions)
	p := Plan{Recipe: cfg.Recipe.Name, GPUs: cfg.Recipe.Nodes * cfg.Recipe.GPUsPerNode, WindowMin: cfg.Sweep.GPUWindowMin}
	sw := cfg.Sweep
	stepMin := (sw.WarmupS + sw.StepS) / 60
	sessionsRun, what := sw.Ladder, fmt.Sprintf("%d steps of %.0fs warm-up + %.0fs judged, stopping at the first that fails", len(sw.Ladder), sw.WarmupS, sw.StepS)
	if sw.Mode == "adaptive" {
		sessionsRun, what = adaptiveSteps(sw)
	}
	for _, n := range sessionsRun {
		st := PlanStep{Sessions: n, WarmupS: sw.WarmupS, StepS: sw.StepS, Requests: int(math.Round(float64(n) * sw.StepS / turnS))}
		switch n {
		case sw.Target:
			st.Role = "target"
		case sw.Stress:
			st.Role = "stress"
		}
		p.Steps = append(p.Steps, st)
	}
	sweepMin := stepMin * float64(len(sessionsRun))
	if sw.RepeatCrossing() && len(sw.Ladder) > 1 {
		sweepMin += 2 * stepMin
		what += ", then the 2 steps either side of the crossing again (and, when none held, the highest too-close step below them, then up to 2 steps below the lowest, each only if the window still has room)"
	} else if len(sw.Ladder) > 1 {
		what += ", then, when none held, up to 2 steps below the lowest, each only if the window still has room"
	}
	rollback, rollbackWhat := 0.0, "deploy: none (the endpoint is already serving): nothing to roll back"
	if cfg.Recipe.Deploy.Type != "" && cfg.Recipe.Deploy.Type != recipe.DeployNone {
		rollback, rollbackWhat = rollbackMin, "deploy: "+cfg.Recipe.Deploy.Type+": put the previous recipe back"
	}
	evalMin, evalWhat, err := planEvals(cfg)
	if err != nil {
		return Plan{}, err
	}
	p.Phases = []PlanPhase{
		{Name: PhasePreflight, Minutes: preflightMin, What: "endpoint, model, recipe live, every bar signal reported, engine idle, token calibration"},
		{Name: PhaseEvals, Minutes: evalMin, What: evalWhat},
		{Name: PhaseSweep, Minutes: sweepMin, What: what},
		{Name: PhaseCapacity, Minutes: 0, What: "computed from the judged steps"},
		{Name: PhasePostflight, Minutes: sw.DrainS / 60, What: fmt.Sprintf("wait up to %.0fs for nothing running or waiting", sw.DrainS)},
		{Name: PhaseRollback, Minutes: rollback, What: rollbackWhat},
	}
	for _, ph := range p.Phases {
		p.Minutes += ph.Minutes
	}
	p.GPUMinutes = p.Minutes * float64(p.GPUs)
	repeats := 0
	if sw.RepeatCrossing() && len(sw.Ladder) > 1 {
		repeats = 2
	}
	p.StepLength = stepLength(cfg, p.Steps, repeats, p.Minutes, sweepMin, p.GPUs)
	if cfg.TimeScale.Virtual() {
		p.Notes = append(p.Notes, "time_scale: virtual: the run takes as long as its computation (seconds), not its modelled minutes")
	} else {
		p.WallMinutes = p.Minutes / float64(cfg.TimeScale)
	}
	p.Fits = p.Minutes <= cfg.Sweep.GPUWindowMin
	if !p.Fits {
		p.Notes = append(p.Notes, fmt.Sprintf("the worst case takes %.0f minutes, more than the %.0f-minute window: shorten steps or the ladder, or ask for a longer window", p.Minutes, cfg.Sweep.GPUWindowMin))
	}
	if n := singleLaneNote(cfg, sessionsRun); n != "" {
		p.Notes = append(p.Notes, n)
	}
	if n := tierlessNote(cfg, sessionsRun); n != "" {
		p.Notes = append(p.Notes, n)
	}
	var ctxNote string
	p.OverContext, ctxNote = planContextNotes(cfg, sessions)
	p.Notes = append(p.Notes, ctxNote)
	p.Notes = append(p.Notes, fmt.Sprintf("requests expected assume %.0fs per turn (recorded think time, capped as configured, plus the traces' own API time); a slower recipe gets fewer, since the replay is closed-loop", turnS))

	mapping, err := Mapping(cfg.Recipe)
	if err != nil {
		return Plan{}, err
	}
	targets := cfg.Recipe.Metrics
	if cfg.Recipe.Endpoint == config.SimEndpoint {
		targets = []string{"the built-in simulator's /metrics"}
	}
	parts := map[string]string{
		signal.TTFT: "ttft", signal.TPOT: "interactivity", signal.ITL: "interactivity (derived per request from inter-token latency)",
		signal.HTTP4xx: "errors", signal.HTTP5xx: "errors", signal.RequestsAborted: "errors",
		signal.Running: "post-flight, kill switch", signal.Waiting: "post-flight, kill switch", signal.KVCacheUsage: "KV-full stop, latency at the KV limit",
	}
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		ps := PlanSignal{Signal: name, Part: parts[name]}
		for _, rule := range mapping {
			if rule.Common == name {
				ps.Sources = append(ps.Sources, rule.Metric+matchText(rule.Match))
			}
		}
		if len(ps.Sources) == 0 {
			ps.Sources = []string{"MISSING: the mapping has no rule for it"}
		} else {
			ps.Sources[len(ps.Sources)-1] += " from " + strings.Join(targets, ", ")
		}
		p.Signals = append(p.Signals, ps)
	}
	return p, nil
}

func matchText(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	var kv []string
	for k, v := range m {
		kv = append(kv, fmt.Sprintf("%s=~%q", k, v))
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// meanTurnSeconds estimates one turn's length in modelled seconds from the
// traces: think time as the run will apply it, plus the recorded API time.
func meanTurnSeconds(cfg config.Run, sessions map[string][]load.Session) float64 {
	sum, n := 0.0, 0
	for _, ss := range sessions {
		for _, s := range ss {
			for _, t := range s.Turns {
				think := t.ThinkTime
				switch cfg.Workload.ThinkTime {
				case "none":
					think = 0
				case "capped":
					think = math.Min(think, cfg.Workload.ThinkTimeCapS)
				}
				api := t.APITime
				if api <= 0 {
					api = 10 // no API time recorded: a typical agent turn
				}
				sum += think + api
				n++
			}
		}
	}
	if n == 0 {
		return 30
	}
	return sum / float64(n)
}

// WriteText prints the plan for people.
func (p Plan) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "plan for recipe %s (no load is sent)\n\nphases:\n", p.Recipe)
	for _, ph := range p.Phases {
		fmt.Fprintf(&b, "  %-12s %6.1f min  %s\n", ph.Name, ph.Minutes, ph.What)
	}
	b.WriteString("\nsteps:\n  sessions  warm-up  judged  requests expected\n")
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "  %8d  %6.0fs  %5.0fs  %17d  %s\n", s.Sessions, s.WarmupS, s.StepS, s.Requests, s.Role)
	}
	b.WriteString("\nsignals the bar and the stops need, and where they come from:\n")
	for _, s := range p.Signals {
		fmt.Fprintf(&b, "  %-22s %-26s %s\n", s.Signal, s.Part, strings.Join(s.Sources, "; "))
	}
	verdict := "fits"
	if !p.Fits {
		verdict = "DOES NOT FIT"
	}
	fmt.Fprintf(&b, "\nworst case: %.0f minutes against the %.0f-minute GPU window: %s; ", p.Minutes, p.WindowMin, verdict)
	if p.GPUs > 0 {
		fmt.Fprintf(&b, "%.0f minutes x %d GPUs = %.0f GPU-minutes", p.Minutes, p.GPUs, p.GPUMinutes)
	} else {
		// a real endpoint given no --gpus: no GPU-minutes of hardware nobody named
		b.WriteString("GPUs not stated, so no GPU-minutes (--gpus or recipe.nodes and recipe.gpus_per_node count them)")
	}
	if p.WallMinutes > 0 && p.WallMinutes != p.Minutes {
		fmt.Fprintf(&b, " (%.1f minutes of wall time on the scaled clock)", p.WallMinutes)
	}
	b.WriteString("\n")
	if sl := p.StepLength; sl.MaxStepS > 0 && p.GPUs > 0 {
		fmt.Fprintf(&b, "steps that run until decided (up to %.0fs each, within the window; 0 errors clear the bar in %d turns): expected %.0f GPU-minutes (%.0f minutes), worst case %.0f GPU-minutes (%.0f minutes)\n",
			sl.MaxStepS, sl.TurnsForErrors, sl.ExpectedGPUMinutes, sl.ExpectedMinutes, sl.WorstGPUMinutes, sl.WorstMinutes)
	} else if sl.MaxStepS > 0 {
		fmt.Fprintf(&b, "steps that run until decided (up to %.0fs each, within the window; 0 errors clear the bar in %d turns): expected %.0f minutes, worst case %.0f minutes\n",
			sl.MaxStepS, sl.TurnsForErrors, sl.ExpectedMinutes, sl.WorstMinutes)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// singleLaneNote warns of the ladder's steps where a tier of the mix has a
// single lane. A step's interval carries which sessions the run drew,
// resampled within each tier, and one lane gives a tier no spread to read:
// the interval leaves it out, or, once the lane has replayed a second
// session, expands the sessions' reach as a t with one degree of freedom
// allows (9 times; llm-d-inference-sim at 2 sessions: TTFT 2.38 s, interval
// 0.15-37 s). It names the smallest step with two lanes in every tier.
func singleLaneNote(cfg config.Run, sessionsRun []int) string {
	w := cfg.Workload
	if !(w.Mix.Heavy > 0 && w.Mix.Light > 0) {
		return "" // one tier: its lanes are resampled together
	}
	mix := mixOf(w)
	var steps, tiers []string
	for _, n := range sessionsRun {
		lanes := load.LanesPerTier(n, mix)
		var single []string
		for _, m := range mix {
			if lanes[m.Tier] == 1 {
				single = append(single, m.Tier)
			}
		}
		if len(single) > 0 {
			steps = append(steps, strconv.Itoa(n))
			if len(single) > len(tiers) {
				tiers = single
			}
		}
	}
	if len(steps) == 0 {
		return ""
	}
	least := 2
	for ; least < 1000; least++ {
		lanes := load.LanesPerTier(least, mix)
		if !slices.ContainsFunc(mix, func(m load.TierShare) bool { return lanes[m.Tier] < 2 }) {
			break
		}
	}
	have := "the " + strings.Join(tiers, " and ") + " tier has a single lane"
	if len(tiers) > 1 {
		have = "the " + strings.Join(tiers, " and ") + " tiers have a single lane each"
	}
	return fmt.Sprintf("at %s sessions %s: one lane shows nothing of how a tier's sessions differ, which a step's interval must carry (it resamples sessions within each tier), so there the interval either leaves that out or, once a lane has replayed a second session, widens as far as one degree of freedom allows (about 9 times: llm-d-inference-sim at 2 sessions read TTFT 2.38 s, 0.15-37 s); the smallest step with two lanes in every tier of this mix is %d sessions",
		strings.Join(steps, ", "), have, least)
}

// tierlessNote names the steps where a tier of the mix gets no lane at all
// (0.9/0.1 at 4 sessions: four heavy lanes), so that step runs the other
// tiers alone and its verdict is not the mix's.
func tierlessNote(cfg config.Run, sessionsRun []int) string {
	mix := mixOf(cfg.Workload)
	var notes []string
	for _, n := range sessionsRun {
		lanes := load.LanesPerTier(n, mix)
		for _, m := range mix {
			if m.Share > 0 && lanes[m.Tier] == 0 {
				notes = append(notes, fmt.Sprintf("%d sessions give the %s tier no lane", n, m.Tier))
			}
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return strings.Join(notes, "; ") + ": such a step replays the other tier alone, so its verdict is not the mix's; a step with at least one lane in every tier runs it"
}
