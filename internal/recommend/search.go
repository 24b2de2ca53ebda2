package recommend

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
)

// RunFunc runs one candidate's run file and returns its summary; rig.Run
// by default.
type RunFunc func(ctx context.Context, cfg config.Run) (report.Summary, error)

// Options configure a search.
type Options struct {
	// Workers is how many candidates simulate at once; default 2. Each
	// virtual run has its own clock, so they are independent.
	Workers int
	// Progress gets a line per candidate as it finishes; nil is quiet.
	Progress io.Writer
	// Version is headroom's version, written into each run's summary.
	Version string
	// Run replaces rig.Run, for tests.
	Run RunFunc
}

// Outcome is what simulating one candidate gave.
type Outcome struct {
	Candidate
	Summary report.Summary
	Err     error
	WallS   float64
}

// Search simulates every candidate that is not skipped, Workers at a time,
// and ranks them. A cancelled context stops the candidates not yet started;
// those are listed with the reason.
func Search(ctx context.Context, s Space, o Options) (Result, error) {
	cands, err := s.Candidates()
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	outs := Simulate(ctx, cands, o)
	res := Rank(s, outs)
	res.WallS = time.Since(start).Seconds()
	return res, ctx.Err()
}

// Simulate runs the candidates that are not skipped and returns one
// outcome per candidate, in the candidates' order.
func Simulate(ctx context.Context, cands []Candidate, o Options) []Outcome {
	runOne := o.Run
	if runOne == nil {
		runOne = func(ctx context.Context, cfg config.Run) (report.Summary, error) {
			return rig.Run(ctx, rig.Options{Config: cfg, Version: o.Version})
		}
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	workers := o.Workers
	if workers < 1 {
		workers = 2
	}
	n := len(cands)
	outs := make([]Outcome, n)
	var mu sync.Mutex // guards progress
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(progress, format+"\n", args...)
		mu.Unlock()
	}
	started := make([]bool, n)
	_ = rig.Parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		started[i] = true
		c := cands[i]
		out := Outcome{Candidate: c}
		switch {
		case c.Skip != "":
			say("candidate %d of %d (%s): skipped: %s", c.Index, n, c.Label, c.Skip)
		case ctx.Err() != nil:
			out.Err = fmt.Errorf("not simulated: %w", ctx.Err())
		default:
			t := time.Now()
			out.Summary, out.Err = runOne(ctx, c.Config)
			out.WallS = time.Since(t).Seconds()
			say("candidate %d of %d (%s): %s [%.1f s]", c.Index, n, c.Label, brief(out), out.WallS)
		}
		outs[i] = out
		return nil // a candidate that failed is ranked as such, not the end of the search
	})
	for i, c := range cands {
		switch {
		case started[i]:
		case c.Skip != "":
			outs[i] = Outcome{Candidate: c}
		default: // ctx ended before it started
			outs[i] = Outcome{Candidate: c, Err: fmt.Errorf("not simulated: %w", context.Cause(ctx))}
		}
	}
	return outs
}

// brief is an outcome's progress line: capacity, target verdict, steps.
func brief(o Outcome) string {
	s := o.Summary
	line := "capacity " + s.Capacity.String()
	if len(s.Steps) == 0 {
		line = "no step judged"
	}
	if s.Target != nil {
		line += fmt.Sprintf("; target %d: %s", s.Target.Sessions, s.Target.Verdict)
	}
	line += fmt.Sprintf("; %d steps", len(s.Steps))
	if o.Err != nil {
		line += "; error: " + o.Err.Error()
	}
	return line
}
