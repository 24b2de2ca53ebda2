// Package rehearse runs a run file's phases against the built-in simulated
// gateway once clean and once per fault, on the virtual clock, and checks
// that every verdict is what it must be: a crashed engine never passes,
// missing metrics read no data, refusals count as errors, and so on. It is
// the rehearsal level of DESIGN.md: seconds on a laptop that catch the rig
// bugs which would otherwise cost a GPU window.
package rehearse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Row is one rehearsal: the fault, what must come out, what came out.
type Row struct {
	Fault    string  `json:"fault"`
	Expected string  `json:"expected"`
	Got      string  `json:"got"`
	OK       bool    `json:"ok"`
	TookS    float64 `json:"took_s"`
}

// Outcome is what one rehearsal run gave, for its check.
type Outcome struct {
	Summary report.Summary
	Err     error
}

// Scenario is one fault and the verdict it must give.
type Scenario struct {
	Name, Expected string
	// Faults are the simulator's faults, as recipe.sim.faults takes them.
	Faults string
	// Tweak changes the rehearsal's run file for this fault.
	Tweak func(*config.Run)
	// InterruptAtStep cancels the run when this step starts (1 = the first).
	InterruptAtStep int
	// Check says what came out and whether it is what must.
	Check func(Outcome) (got string, ok bool)
}

// Options shape a rehearsal.
type Options struct {
	// Short keeps only the faults a quick check needs (go test).
	Short bool
	// Only runs the scenarios whose names contain this text.
	Only string
	// Progress gets a line per scenario as it starts and ends; nil is quiet.
	Progress io.Writer
}

// Base turns a run file into the rehearsal's: the built-in simulator on the
// virtual clock, its first step only, evals only where a fault needs them,
// output in dir.
func Base(cfg config.Run, dir string) config.Run {
	cfg.Recipe.Endpoint = config.SimEndpoint
	cfg.Recipe.Metrics, cfg.Recipe.Prometheus, cfg.Recipe.Discovery, cfg.Recipe.MetricsAuth = nil, nil, nil, nil
	cfg.Recipe.APIKeyEnv, cfg.Recipe.Headers, cfg.Recipe.TLS = "", nil, nil
	cfg.Recipe.Deploy = recipe.Deploy{}
	cfg.Recipe.Sim.Faults = nil
	cfg.Recipe.MaxModelLen, cfg.Recipe.EngineVersion = 0, ""
	if cfg.Recipe.Engine == "" {
		cfg.Recipe.Engine = "vllm"
	}
	if cfg.Recipe.Mapping == "" || cfg.Recipe.Mapping == "modelplane" || cfg.Recipe.Mapping == "gen_ai" {
		cfg.Recipe.Mapping = "vllm"
	}
	// Every fault is timed in modelled seconds, so the verdicts are the
	// same on the virtual clock, which runs each rehearsal as fast as it
	// computes and the same however busy the host is.
	cfg.TimeScale = config.Virtual
	cfg.Sweep.Ladder = cfg.Sweep.Ladder[:1]
	cfg.Sweep.Target, cfg.Sweep.Stress = 0, 0
	cfg.Sweep.Mode = "ladder"
	cfg.Evals.Suites, cfg.Evals.Custom, cfg.Evals.UnderLoadShare = nil, nil, 0
	cfg.Notify = config.Notify{}
	cfg.Output = dir
	return cfg
}

// Run runs every scenario on base (see Base) and returns a row each. It
// returns an error only when a scenario could not be set up.
func Run(ctx context.Context, base config.Run, o Options) ([]Row, error) {
	var rows []Row
	for _, sc := range Scenarios(base) {
		if o.Short && !shortList[sc.Name] || o.Only != "" && !strings.Contains(sc.Name, o.Only) {
			continue
		}
		if ctx.Err() != nil {
			return rows, ctx.Err()
		}
		row, err := one(ctx, base, sc, o.Progress)
		if err != nil {
			return rows, fmt.Errorf("rehearsal %q: %w", sc.Name, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// shortList is what `go test` rehearses: one of each kind of outcome.
var shortList = map[string]bool{"clean": true, "crashed engine mid-step": true, "metrics gone": true, "wrong model live": true}

func one(ctx context.Context, base config.Run, sc Scenario, progress io.Writer) (Row, error) {
	cfg := base
	if sc.Faults != "" {
		cfg.Recipe.Sim.Faults = []byte(sc.Faults)
	}
	if sc.Tweak != nil {
		sc.Tweak(&cfg)
	}
	if sc.InterruptAtStep > 0 && cfg.TimeScale.Virtual() {
		// The interrupt is a cancel a wall-clock moment after the step's
		// line (see stepWatch), as a person's Ctrl-C is: on the virtual
		// clock that moment could fall anywhere in the step, or after it.
		// The run is cancelled early, so the scaled clock costs little.
		cfg.TimeScale = interruptScale
	}
	if err := cfg.Validate(); err != nil {
		return Row{}, err
	}
	if progress != nil {
		fmt.Fprintf(progress, "rehearsing: %s ...\n", sc.Name)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var log io.Writer = io.Discard
	if sc.InterruptAtStep > 0 {
		log = &stepWatch{step: sc.InterruptAtStep, fire: cancel}
	}
	start := time.Now()
	sum, err := rig.Run(rctx, rig.Options{Config: cfg, Progress: log})
	got, ok := sc.Check(Outcome{Summary: sum, Err: err})
	row := Row{Fault: sc.Name, Expected: sc.Expected, Got: got, OK: ok, TookS: time.Since(start).Seconds()}
	if progress != nil {
		fmt.Fprintf(progress, "rehearsed: %s: %s (%s)\n", sc.Name, got, okWord(ok))
	}
	return row, nil
}

// interruptScale is the scaled wall clock of the rehearsals that
// interrupt their run (InterruptAtStep).
const interruptScale config.Scale = 100

// stepWatch cancels the run once the progress says a step has started.
type stepWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	step int
	fire func()
	done bool
}

func (w *stepWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.buf.Write(p)
		if strings.Contains(w.buf.String(), fmt.Sprintf("step %d: ", w.step)) {
			w.done = true
			go func() { time.Sleep(200 * time.Millisecond); w.fire() }()
		}
	}
	return len(p), nil
}

func okWord(ok bool) string {
	if ok {
		return "ok"
	}
	return "WRONG"
}

// Failed reports whether any row came out wrong.
func Failed(rows []Row) bool {
	for _, r := range rows {
		if !r.OK {
			return true
		}
	}
	return false
}

// WriteTable prints the rows as an aligned table.
func WriteTable(w io.Writer, rows []Row) error {
	width := [3]int{len("fault"), len("expected"), len("got")}
	for _, r := range rows {
		width[0], width[1], width[2] = max(width[0], len(r.Fault)), max(width[1], len(r.Expected)), max(width[2], len(r.Got))
	}
	var b strings.Builder
	line := func(a, e, g, ok string) {
		fmt.Fprintf(&b, "%-*s  %-*s  %-*s  %s\n", width[0], a, width[1], e, width[2], g, ok)
	}
	line("fault", "expected", "got", "ok")
	for _, r := range rows {
		line(r.Fault, r.Expected, r.Got, okWord(r.OK))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// firstStep is the first judged step's verdict, or "" when none ran.
func firstStep(s report.Summary) verdict.Verdict {
	if len(s.Steps) == 0 {
		return ""
	}
	return s.Steps[0].Verdict
}

// phaseOf is the named phase's status and detail.
func phaseOf(s report.Summary, name string) (status, detail string) {
	for _, p := range s.Phases {
		if p.Name == name {
			return p.Status, p.Detail
		}
	}
	return "", ""
}

// short cuts a detail for the table.
func short(s string) string {
	if len(s) > 70 {
		return s[:67] + "..."
	}
	return s
}

// errPhase is the phase a run error came from, or "".
func errPhase(err error) string {
	var pe *rig.PhaseError
	if errors.As(err, &pe) {
		return pe.Phase
	}
	return ""
}
