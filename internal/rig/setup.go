package rig

import (
	"fmt"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/trace"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// remaining is the ladder left after the steps already judged.
func remaining(ladder []int, done []sweep.StepResult) []int {
	if len(done) == 0 {
		return ladder
	}
	last := done[len(done)-1]
	if v := last.Judged.Verdict; v == verdict.Fail || v == verdict.NoData {
		return nil
	}
	var out []int
	for _, n := range ladder {
		if n > last.Sessions {
			out = append(out, n)
		}
	}
	return out
}

// VerdictOptions are the run file's judging options, the same for a
// recipe run's steps and a canary's windows.
func VerdictOptions(cfg config.Run) verdict.Options {
	opts := verdict.DefaultOptions()
	opts.Seed, opts.Resamples, opts.Block = cfg.Sweep.Seed, cfg.Sweep.Resamples, cfg.Sweep.BootstrapBlock
	opts.ClientErrors = cfg.Bar.ClientErrors
	opts.AllowPreemptions, opts.KVLimit = cfg.Bar.AllowPreemptions, cfg.Sweep.KVLimit
	return opts
}

// SweepPlan turns the run file's sweep into the sweep's plan.
func SweepPlan(cfg config.Run) sweep.Plan {
	opts := VerdictOptions(cfg)
	return sweep.Plan{
		Ladder: cfg.Sweep.Ladder, Warmup: seconds(cfg.Sweep.WarmupS), Step: seconds(cfg.Sweep.StepS),
		MaxStep: seconds(cfg.Sweep.MaxStepS), Budget: sweepBudget(cfg),
		Window: seconds(cfg.Sweep.WindowS), Scrape: seconds(cfg.Sweep.ScrapeS), Drain: seconds(cfg.Sweep.DrainS),
		Bar:        BarOf(cfg.Bar),
		Options:    opts,
		Repeat:     cfg.Sweep.RepeatCrossing(),
		Kill:       sweep.Kill(cfg.Sweep.Kill),
		KVFull:     cfg.Sweep.KVFull,
		Adaptive:   cfg.Sweep.Mode == "adaptive",
		Resolution: cfg.Sweep.Resolution,
	}
}

// BarOf converts the run file's bar.
func BarOf(b config.Bar) verdict.Bar {
	return verdict.Bar{TTFTP90: b.TTFTP90S, InteractivityP90: b.InteractivityP90TPS, ErrorRate: b.ErrorRate}
}

// Mapping resolves the recipe's metric mapping and mapping file.
func Mapping(rc config.Recipe) (signal.Mapping, error) {
	m, err := signal.MappingByName(rc.Mapping)
	if err != nil {
		return nil, fmt.Errorf("recipe.mapping: %w", err)
	}
	if rc.MappingFile != "" {
		if m, err = signal.LoadMapping(rc.Path(rc.MappingFile), m); err != nil {
			return nil, fmt.Errorf("recipe.mapping_file: %w", err)
		}
	}
	return m, nil
}

// FreshSessions returns, for synthesised traces, the sessions a repeat's
// lanes replay after load.Generator.Reseed(epoch): the same synthesiser
// with a fresh seed, so a repeat draws fresh sessions, not only fresh plays
// of the corpus the first run drew from (issue 21.2). For a trace file it
// returns nil: the lanes go on with the next sessions of their order.
func FreshSessions(w config.Workload) func(epoch int) map[string][]load.Session {
	if w.Traces != "synth" {
		return nil
	}
	return func(epoch int) map[string][]load.Session {
		f := w
		f.Seed = w.Seed ^ (uint64(epoch) * 0x9e3779b97f4a7c15)
		s, err := BuildSessions(f)
		if err != nil {
			return nil // the first corpus was built from the same settings
		}
		// the synthesiser numbers its sessions alike whatever the seed:
		// mark them, so records (and the intervals' sessions) tell them apart
		for _, tier := range s {
			for i := range tier {
				tier[i].ID = fmt.Sprintf("%s.r%d", tier[i].ID, epoch)
			}
		}
		return s
	}
}

// BuildSessions loads or synthesises traces and splits them into tiers.
func BuildSessions(w config.Workload) (map[string][]load.Session, error) {
	var traces []trace.Trace
	if w.Traces == "synth" {
		traces = trace.Synthesize(trace.SynthOptions{Sessions: w.SynthSessions, Seed: w.Seed, HeavyShare: 0.5, ColdResumes: w.SynthColdResumes})
	} else {
		var err error
		if traces, err = trace.ReadPath(w.Traces); err != nil {
			return nil, err
		}
	}
	if len(traces) < 4 {
		return nil, fmt.Errorf("workload.traces: %d traces; at least 4 are needed to cut heavy and light quarters", len(traces))
	}
	heavy, light := trace.Tiers(traces)
	out := map[string][]load.Session{}
	for tier, ts := range map[string][]trace.Trace{"heavy": heavy, "light": light} {
		for _, t := range ts {
			out[tier] = append(out[tier], load.Session{ID: t.ID, Tier: tier, Turns: t.Turns()})
		}
	}
	return out, nil
}
