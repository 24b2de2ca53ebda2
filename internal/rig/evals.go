package rig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/eval"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/transport"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Suites builds the eval suites the run file asks for.
func Suites(e config.Evals) ([]eval.Suite, error) {
	var out []eval.Suite
	for _, name := range e.Suites {
		switch name {
		case "tool_calling":
			out = append(out, eval.ToolSuite{})
		case "long_context_readback":
			out = append(out, eval.ReadBackSuite{ContextLen: e.ContextLen})
		}
	}
	for _, f := range e.Custom {
		s, err := eval.LoadCustom(f)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// RunEvals runs the suites one request at a time, the smoke test before
// any load. Deadlines are in modelled time on clock.
func RunEvals(ctx context.Context, cfg config.Run, endpoint string, clock *timescale.Clock) (eval.Report, error) {
	suites, err := Suites(cfg.Evals)
	if err != nil {
		return eval.Report{}, err
	}
	acc, err := resolveAccess(cfg, nil)
	if err != nil {
		return eval.Report{}, err
	}
	return runEvals(ctx, cfg, suites, endpoint, acc.endpoint, clock), nil
}

// runEvals is RunEvals reaching the endpoint through conn.
func runEvals(ctx context.Context, cfg config.Run, suites []eval.Suite, endpoint string, conn transport.Conn, clock *timescale.Clock) eval.Report {
	client := eval.NewClient(endpoint, cfg.Recipe.Model, eval.ClientOptions{Timeout: clock.Real(seconds(cfg.Evals.TimeoutS)), Conn: conn, Clock: clock})
	defer client.Close()
	return eval.Run(ctx, client, suites, eval.Options{Concurrency: 1, Seed: cfg.Workload.Seed, Threshold: cfg.Evals.Threshold})
}

// underLoad sends a share of each step's requests as tool-call evals, beside
// the lanes' turns (so sessions keep their prefix cache), and tallies the
// calls that do not match their schema per step.
type underLoad struct {
	mixer    *eval.Mixer
	tally    *eval.Tally
	client   *eval.Client
	maxShare float64
	ctx      context.Context
	cancel   context.CancelFunc
	clock    *timescale.Clock
	wg       *timescale.Group

	mu      sync.Mutex
	perStep map[int]int // eval requests sent per step
}

// minPerStep eval requests go out at the start of every step's judged time,
// whatever the share, so no step is left without a tool-call measurement.
const minPerStep = 3

func newUnderLoad(cfg config.Run, endpoint string, conn transport.Conn, clock *timescale.Clock) (*underLoad, error) {
	if cfg.Evals.UnderLoadShare <= 0 {
		return nil, nil
	}
	m, err := eval.NewMixer(cfg.Evals.UnderLoadShare, cfg.Workload.Seed, eval.ToolSuite{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := clock.WithCancel(context.Background())
	return &underLoad{
		mixer: m, tally: eval.NewTally(), maxShare: cfg.Evals.ToolCallMaxShare, ctx: ctx, cancel: cancel, perStep: map[int]int{},
		clock: clock, wg: clock.NewGroup(),
		client: eval.NewClient(endpoint, cfg.Recipe.Model, eval.ClientOptions{Timeout: clock.Real(seconds(cfg.Evals.TimeoutS)), Conn: conn, Clock: clock}),
	}, nil
}

// sent is called as each lane request goes out; some of them bring an eval
// request along.
func (u *underLoad) sent(rec load.Record) {
	if rec.Phase != load.PhaseMeasure {
		return
	}
	u.mu.Lock()
	forced := u.perStep[rec.Step] < minPerStep
	u.mu.Unlock()
	if !forced && !u.mixer.Take() {
		return
	}
	u.mu.Lock()
	u.perStep[rec.Step]++
	u.mu.Unlock()
	c := u.mixer.Next()
	u.wg.Go(func() {
		res := eval.RunCase(u.ctx, u.client, c)
		if res.Class != eval.ClassAborted {
			u.tally.Add(rec.Step, res)
		}
	})
}

// part is step i's bar part for tool calls under load.
func (u *underLoad) part(i int) []verdict.Part {
	return []verdict.Part{u.tally.Step(i).Part(u.maxShare, 0.95)}
}

// stop cancels eval requests still in flight (after grace) and waits for them.
func (u *underLoad) stop(grace time.Duration) {
	gctx, stop := u.clock.WithTimeout(context.Background(), u.clock.Modelled(grace))
	_ = u.wg.Wait(gctx)
	stop()
	u.cancel()
	_ = u.wg.Wait(context.Background())
	u.client.Close()
}

func evalDetail(r eval.Report) string {
	out := fmt.Sprintf("%s:", r.Verdict)
	for _, s := range r.Suites {
		out += fmt.Sprintf(" %s %d/%d (%s)", s.Suite, s.Passed, s.Cases, s.Verdict)
	}
	return out
}

// blockedBy says why a report that failed with confidence blocks the
// recipe: the suites that failed, with their counts.
func blockedBy(r eval.Report) string {
	var failed []string
	for _, s := range r.Suites {
		if s.Verdict == eval.Fail {
			failed = append(failed, fmt.Sprintf("%s %d/%d passed, confidently under %g", s.Suite, s.Passed, s.Cases, s.Threshold))
		}
	}
	return "mini evals failed: " + strings.Join(failed, "; ")
}

// blockedError is a mini-evals phase that failed and blocks the recipe
// while the run goes on to measure capacity.
type blockedError struct{ why string }

func (e *blockedError) Error() string {
	return e.why + "; the sweep measures capacity anyway, and the target reads fail (evals.stop_on_fail: true ends the run here)"
}

// readBlock is the block a saved run's evals.json calls for; empty when
// the evals passed, were not run or were not saved.
func readBlock(d *report.Dir) (string, error) {
	b, err := os.ReadFile(d.File("evals.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var rep eval.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return "", fmt.Errorf("%s: %w", d.File("evals.json"), err)
	}
	if !rep.Blocked() {
		return "", nil
	}
	return blockedBy(rep), nil
}
