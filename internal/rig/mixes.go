package rig

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
)

// mainMix is cfg with its workload set to the first of sweep.mixes.
func mainMix(cfg config.Run) config.Run {
	if len(cfg.Sweep.Mixes) > 0 {
		if m, ok := config.MixNamed(cfg.Sweep.Mixes[0], cfg.Workload.Mix); ok {
			cfg.Workload.Mix = m
		}
	}
	return cfg
}

// otherMixes sweeps the ladder again for each mix of sweep.mixes after the
// first, against the endpoint the run is using (deploy none: the candidate
// stays up until the run's own rollback), each in a run directory of its own
// under dir/mixes, and returns their results for the summary. A mix that
// fails is a result with its stop reason, not the run's failure.
func (r *run) otherMixes(ctx context.Context, cfg config.Run) []report.MixResult {
	if len(cfg.Sweep.Mixes) < 2 {
		return nil
	}
	var out []report.MixResult
	for _, name := range cfg.Sweep.Mixes[1:] {
		if ctx.Err() != nil {
			break
		}
		m, _ := config.MixNamed(name, r.cfg.Workload.Mix)
		sub := cfg
		sub.Workload.Mix = m
		sub.Sweep.Mixes = nil
		sub.Recipe.Name = cfg.Recipe.Name + "-" + name
		sub.Recipe.Deploy = recipe.Deploy{Type: recipe.DeployNone}
		sub.Notify, sub.Deploy = config.Notify{}, config.Deploy{}
		sub.Evals.Suites, sub.Evals.Custom = nil, nil
		sub.Report = config.Report{}
		sub.Output = filepath.Join(r.dir.Path(), "mixes")
		r.logf("mix %s (heavy %.0f%%, light %.0f%%): its own ladder, in %s", name, 100*m.Heavy, 100*m.Light, sub.Output)
		res, err := Run(ctx, Options{Config: sub, Progress: r.o.Progress, Version: r.o.Version})
		mr := report.MixResult{Name: name, Mix: report.Mix{Heavy: m.Heavy, Light: m.Light}, Steps: res.Steps,
			Capacity: res.Capacity, Target: res.Target, StopReason: res.StopReason}
		if res.Cost.USDPerHour > 0 {
			c := res.Cost
			mr.Cost = &c
		}
		if err != nil {
			mr.StopReason = fmt.Sprintf("%s (%v)", res.StopReason, err)
		}
		r.logf("mix %s: capacity %s", name, res.Capacity.String())
		out = append(out, mr)
	}
	return out
}
