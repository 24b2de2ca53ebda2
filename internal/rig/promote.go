package rig

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// PhasePromote is the phase that keeps the candidate instead of rolling it
// back.
const PhasePromote = "promote"

// Promotion is whether a run keeps the candidate it deployed, and why.
type Promotion struct {
	Promote bool
	// RunID names the run in the headroom.dev/promoted label:
	// <recipe>/<time> of its run directory.
	RunID string
	// Reason says why, in a line, for the phase's detail and the report.
	Reason string
	// Compared are the run directories the candidate was compared with.
	Compared []string
}

// DecidePromotion decides whether the run summarised in sum keeps its
// candidate: only under deploy.promote on_target, only when the run ended
// without an error and its target passed (never on too close, no data or
// fail), and only when it is clearly the cheapest per session-hour among
// the runs compared: deploy.compare, or else the latest run of the
// recipe's parent under output. Clearly: its cost interval lies wholly
// below every other run's that held the same target on the same bar, so a
// close call is never promoted either. A parent with no run to compare
// with, or a run judged on another bar, keeps the candidate from being
// promoted, and the reason says what to run or list.
func DecidePromotion(cfg config.Run, sum report.Summary) Promotion {
	p := Promotion{RunID: runID(sum.RunDir)}
	no := func(format string, args ...any) Promotion {
		p.Reason = "not promoted: " + fmt.Sprintf(format, args...)
		return p
	}
	if !cfg.Deploy.PromoteOn() {
		return no("deploy.promote is never")
	}
	if cfg.Recipe.Deploy.Type != recipe.DeployKubernetes {
		return no("only recipe.deploy.type kubernetes can keep a candidate")
	}
	if sum.Error != "" {
		return no("the run ended in an error (%s)", firstLine(sum.Error))
	}
	t := sum.Target
	if t == nil {
		return no("no target was judged (set sweep.target)")
	}
	if t.Verdict != verdict.Pass {
		return no("the target of %d sessions reads %s; only a pass promotes", t.Sessions, t.Verdict)
	}
	own, ok := costOf(sum)
	if !ok {
		return no("the run has no cost per session-hour")
	}
	others, err := comparedRuns(cfg, sum.RunDir)
	if err != nil {
		return no("%v", err)
	}
	var beaten []string
	for _, o := range others {
		p.Compared = append(p.Compared, o.RunDir)
		name := o.Recipe.Name + " (" + o.RunDir + ")"
		if !sameBar(o.Bar, sum.Bar) {
			return no("%s was judged on another bar (%s); compare runs judged on the same bar", name, barText(o.Bar))
		}
		if o.Target == nil || o.Target.Sessions != t.Sessions || o.Target.Verdict != verdict.Pass {
			continue // it does not hold the target: it does not compete
		}
		c, ok := costOf(o)
		if !ok {
			continue
		}
		switch {
		case c.center <= own.center:
			return no("%s holds the target at $%.2f per session-hour, not more than this run's $%.2f", name, c.center, own.center)
		case c.atMost:
			return no("too close to call with %s: every step it ran passed, so its $%.2f per session-hour is only an upper bound", name, c.center)
		case own.hi >= c.lo:
			return no("too close to call with %s: $%.2f per session-hour (95%% $%.2f-$%.2f) against its $%.2f ($%.2f-$%.2f)",
				name, own.center, own.lo, own.hi, c.center, c.lo, c.hi)
		}
		beaten = append(beaten, fmt.Sprintf("%s at $%.2f", o.Recipe.Name, c.center))
	}
	p.Promote = true
	p.Reason = fmt.Sprintf("promoted: held the target of %d sessions at $%.2f per session-hour", t.Sessions, own.center)
	if len(beaten) > 0 {
		p.Reason += ", clearly cheaper than " + strings.Join(beaten, ", ")
	} else {
		p.Reason += "; no other run held the target to compare with"
	}
	return p
}

// cost is a run's $ per session-hour with its interval.
type cost struct {
	center, lo, hi float64
	atMost         bool // capacity is a lower bound, so the cost an upper one
}

func costOf(s report.Summary) (cost, bool) {
	c := s.Cost
	if c.USDPerSessionHour == nil {
		return cost{}, false
	}
	out := cost{center: *c.USDPerSessionHour, atMost: c.AtMost}
	out.lo, out.hi = out.center, out.center
	if c.USDPerSessionHourLo != nil {
		out.lo = *c.USDPerSessionHourLo
	}
	if c.USDPerSessionHourHi != nil {
		out.hi = *c.USDPerSessionHourHi
	}
	return out, true
}

// comparedRuns reads the summaries of deploy.compare, or of the latest run
// of the recipe's parent under output; the run itself is left out.
func comparedRuns(cfg config.Run, self string) ([]report.Summary, error) {
	dirs := cfg.Deploy.Compare
	if len(dirs) == 0 && cfg.Recipe.Parent != "" {
		parent := cfg.Recipe.Parent
		if f, ok := cfg.Recipe.ParentFile(); ok {
			pr, err := recipe.Load(f)
			if err != nil {
				return nil, fmt.Errorf("read the parent recipe %s: %v", f, err)
			}
			parent = pr.Name
		}
		d, err := latestRun(filepath.Join(cfg.Output, parent))
		if err != nil {
			return nil, fmt.Errorf("no run of the parent recipe %s to compare with (%v): run it first, or list run directories in deploy.compare", parent, err)
		}
		dirs = []string{d}
	}
	var out []report.Summary
	for _, d := range dirs {
		if same(d, self) {
			continue
		}
		rd, err := report.OpenDir(d)
		if err != nil {
			return nil, fmt.Errorf("deploy.compare: %v", err)
		}
		run, err := report.LoadRun(rd)
		if err != nil {
			return nil, fmt.Errorf("deploy.compare: %v", err)
		}
		if run.Partial {
			return nil, fmt.Errorf("deploy.compare: %s did not finish (no summary.json); compare finished runs", d)
		}
		if run.Summary.RunDir == "" {
			run.Summary.RunDir = d
		}
		out = append(out, run.Summary)
	}
	return out, nil
}

// latestRun is the newest run directory with a summary under a recipe's
// folder (run directories are named by their start time).
func latestRun(folder string) (string, error) {
	entries, err := os.ReadDir(folder)
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(folder, e.Name(), "summary.json")); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("%s holds no finished run", folder)
	}
	slices.Sort(names)
	return filepath.Join(folder, names[len(names)-1]), nil
}

func same(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	x, errA := filepath.Abs(a)
	y, errB := filepath.Abs(b)
	return errA == nil && errB == nil && x == y
}

// runID is <recipe>/<time>: the last two parts of a run directory's path.
func runID(dir string) string {
	dir = filepath.Clean(dir)
	base := filepath.Base(dir)
	return filepath.Base(filepath.Dir(dir)) + "/" + base
}

func sameBar(a, b verdict.Bar) bool {
	return a.TTFTP90 == b.TTFTP90 && a.InteractivityP90 == b.InteractivityP90 && a.ErrorRate == b.ErrorRate
}

func barText(b verdict.Bar) string {
	return fmt.Sprintf("P90 TTFT <= %g s, P90 interactivity >= %g tok/s, errors < %g%%", b.TTFTP90, b.InteractivityP90, 100*b.ErrorRate)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
