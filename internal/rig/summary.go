package rig

import (
	"fmt"
	"runtime"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/transport"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// summary assembles what the run found.
func (r *run) summary(res sweep.Result, cal *prompt.Calibration) report.Summary {
	cfg := r.cfg
	sum := Summarize(cfg, res)
	sum.RunDir = r.dir.Path()
	sum.Started = r.started.UTC().Format(time.RFC3339)
	sum.WallS = time.Since(r.started).Seconds()
	sum.Calibration = cal
	sum.OverContext = r.overContext
	sum.Versions = map[string]string{"headroom": r.o.Version, "go": runtime.Version(),
		"records": fmt.Sprint(load.RecordVersion), "summary": fmt.Sprint(report.SummaryVersion)}
	sum.Phases = r.phases
	if r.blocked != "" {
		sum.Block(r.blocked)
	}
	return sum
}

// Summarize builds the summary of a sweep result under a run file; it is
// shared by live runs and re-judging.
func Summarize(cfg config.Run, res sweep.Result) report.Summary {
	sum := report.Summary{
		Version: report.SummaryVersion,
		Recipe: report.Recipe{Name: cfg.Recipe.Name, Engine: cfg.Recipe.Engine, Nodes: cfg.Recipe.Nodes,
			GPUsPerNode: cfg.Recipe.GPUsPerNode, USDPerGPUHour: cfg.Recipe.USDPerGPUHour,
			Endpoint: transport.URL(cfg.Recipe.Endpoint), Model: cfg.Recipe.Model},
		Bar:        BarOf(cfg.Bar),
		Capacity:   res.Capacity,
		StopReason: res.StopReason,
		PostFlight: res.PostFlight,
		TimeScale:  cfg.TimeScale.Wall(),
		Mix:        &report.Mix{Heavy: cfg.Workload.Mix.Heavy, Light: cfg.Workload.Mix.Light},
	}
	var lastPass *sweep.StepResult
	for i, s := range res.Steps {
		sum.Steps = append(sum.Steps, report.StepOf(s))
		if s.Judged.Verdict == verdict.Pass {
			lastPass = &res.Steps[i]
		}
	}
	var tokens sweep.Tokens
	fromStep := 0
	if lastPass != nil {
		tokens, fromStep = lastPass.Tokens, lastPass.Sessions
	}
	sum.Cost = sweep.CostOf(cfg.Recipe.Nodes, cfg.Recipe.GPUsPerNode, cfg.Recipe.USDPerGPUHour, res.Capacity, tokens, fromStep)
	if cfg.Sweep.Target > 0 {
		t := sweep.TargetOf(res.Steps, res.Capacity, cfg.Sweep.Target)
		sum.Target = &t
	}
	if cfg.Sweep.Stress > 0 {
		t := sweep.TargetOf(res.Steps, res.Capacity, cfg.Sweep.Stress)
		sum.Stress = &t
	}
	sum.Collect(res.Warnings)
	return sum
}

// write saves summary.json and report.md.
func (r *run) write(sum *report.Summary) error {
	sum.WallS = time.Since(r.started).Seconds()
	if err := r.dir.WriteJSON("summary.json", sum); err != nil {
		return err
	}
	return r.dir.WriteFile("report.md", report.Markdown(*sum))
}
