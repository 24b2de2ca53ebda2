package calibrate

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// Runner carries out one recipe run and returns its summary: how a
// prediction re-runs a recipe against the simulator. It may set the run's
// clock (the time scale) as it likes; everything else in cfg is the
// prediction.
type Runner func(ctx context.Context, cfg config.Run) (report.Summary, error)

// SetClock sets cfg's clock as a run file spells time_scale: a number of
// modelled seconds per wall second, or "virtual" where the build runs
// whole recipes on a virtual clock. The run file's own reading of it is
// used, so every spelling it accepts works here, and it is checked as the
// run file's is.
func SetClock(cfg *config.Run, scale string) error {
	if err := yaml.Unmarshal([]byte(scale), &cfg.TimeScale); err != nil {
		return fmt.Errorf("time scale %q: %v", scale, err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("time scale %q: %w", scale, err)
	}
	return nil
}

// PredictConfig is the run file that predicts run r with the profile file
// at profile: the same recipe (named <name>-predicted), workload, bar,
// sweep and seeds, served by one engine of the built-in simulator behaving
// like personality, with nothing deployed, no evals and no notifications.
// Run directories go under out.
func PredictConfig(r Run, profile, personality, out string) (config.Run, error) {
	cfg := r.Config
	rc := cfg.Recipe
	abs, err := filepath.Abs(profile)
	if err != nil {
		return cfg, fmt.Errorf("calibrate: profile %s: %w", profile, err)
	}
	rc.Endpoint, rc.Metrics, rc.Prometheus, rc.Discovery = config.SimEndpoint, nil, nil, nil
	rc.APIKeyEnv, rc.Headers, rc.TLS, rc.MetricsAuth = "", nil, nil, nil
	rc.Mapping, rc.MappingFile = personality, ""
	rc.Deploy = recipe.Deploy{}
	rc.Copies = 1
	if rc.Nodes < 1 || rc.GPUsPerNode < 1 {
		// a flags-only run names no GPUs; the fitted profile is the
		// engine as measured, and the simulator needs a size to run it
		rc.Nodes, rc.GPUsPerNode = 1, 1
	}
	rc.Name += "-predicted"
	rc.Sim = recipe.SimSpec{Profile: abs, Personality: personality, PDLinkBytesPerSecond: rc.Sim.PDLinkBytesPerSecond}
	cfg.Recipe = rc
	cfg.Evals.Suites, cfg.Evals.Custom, cfg.Evals.UnderLoadShare = nil, nil, 0
	cfg.Notify = config.Notify{}
	cfg.Output = out
	cfg.TimeScale = 1
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("calibrate: the prediction's run file for %s: %w", r.Dir, err)
	}
	return cfg, nil
}

// StepComparison is one step's measured and predicted P90s; a value a run
// did not measure (the step was not run, or read no data) is NaN.
type StepComparison struct {
	Sessions                                      int
	MeasuredTTFT, PredictedTTFT                   float64
	MeasuredInteractivity, PredictedInteractivity float64
	// the measured P90s' 95% intervals (NaN where the step had none)
	MeasuredTTFTLo, MeasuredTTFTHi                   float64
	MeasuredInteractivityLo, MeasuredInteractivityHi float64
	MeasuredCacheHit, PredictedCacheHit              float64
	MeasuredVerdict, PredictedVerdict                string
}

// Comparison is a measured run beside its prediction.
type Comparison struct {
	Dir                 string
	Steps               []StepComparison
	Measured, Predicted sweep.Capacity
	// StepSize is the ladder's spacing at the measured capacity, and
	// CapacityError the predicted minus the measured capacity in sessions;
	// NaN when either run established no capacity (no step passed: its
	// sessions are no measurement, so their difference is none either).
	StepSize, CapacityError float64
	PredictedDir            string
	// Stopped is why the predicted sweep stopped, and Error how the
	// predicted run failed after judging some steps.
	Stopped, Error string
}

// CapacitySteps is the capacity error in ladder steps.
func (c Comparison) CapacitySteps() float64 {
	if c.StepSize <= 0 {
		return math.NaN()
	}
	return c.CapacityError / c.StepSize
}

// Predict re-runs r's recipe with cfg (from PredictConfig) through run and
// compares its steps and capacity with what r measured.
func Predict(ctx context.Context, r Run, cfg config.Run, run Runner) (Comparison, error) {
	c := Comparison{Dir: r.Dir, Measured: r.Summary.Capacity}
	sum, err := run(ctx, cfg)
	c.PredictedDir = sum.RunDir
	if err != nil && len(sum.Steps) == 0 {
		return c, fmt.Errorf("calibrate: predicting %s: %w", r.Dir, err)
	}
	c.Predicted, c.Stopped = sum.Capacity, sum.StopReason
	if err != nil {
		c.Error = err.Error()
	}
	c.CapacityError = c.Predicted.Sessions - c.Measured.Sessions
	if c.Predicted.NotEstablished || c.Measured.NotEstablished {
		c.CapacityError = math.NaN()
	}
	c.StepSize = stepAt(cfg.Sweep.Ladder, c.Measured.Sessions)
	c.Steps = compareSteps(r.Summary.Steps, sum.Steps)
	return c, nil
}

// stepAt is the ladder's spacing around sessions.
func stepAt(ladder []int, sessions float64) float64 {
	if len(ladder) < 2 {
		return 0
	}
	l := append([]int(nil), ladder...)
	sort.Ints(l)
	for i := 1; i < len(l); i++ {
		if sessions <= float64(l[i]) {
			return float64(l[i] - l[i-1])
		}
	}
	return float64(l[len(l)-1] - l[len(l)-2])
}

// compareSteps pairs the first step of each session count in the two runs.
func compareSteps(measured, predicted []report.Step) []StepComparison {
	type pair struct{ m, p *report.Step }
	by := map[int]*pair{}
	get := func(n int) *pair {
		if by[n] == nil {
			by[n] = &pair{}
		}
		return by[n]
	}
	for i := range measured {
		if p := get(measured[i].Sessions); p.m == nil {
			p.m = &measured[i]
		}
	}
	for i := range predicted {
		if p := get(predicted[i].Sessions); p.p == nil {
			p.p = &predicted[i]
		}
	}
	var out []StepComparison
	for n, p := range by {
		nan := math.NaN()
		s := StepComparison{Sessions: n, MeasuredTTFT: nan, PredictedTTFT: nan, MeasuredInteractivity: nan,
			PredictedInteractivity: nan, MeasuredCacheHit: nan, PredictedCacheHit: nan,
			MeasuredTTFTLo: nan, MeasuredTTFTHi: nan, MeasuredInteractivityLo: nan, MeasuredInteractivityHi: nan}
		if p.m != nil {
			s.MeasuredTTFT, s.MeasuredInteractivity = p.m.TTFTP90.Center, p.m.InteractivityP90.Center
			s.MeasuredTTFTLo, s.MeasuredTTFTHi = p.m.TTFTP90.Lo, p.m.TTFTP90.Hi
			s.MeasuredInteractivityLo, s.MeasuredInteractivityHi = p.m.InteractivityP90.Lo, p.m.InteractivityP90.Hi
			s.MeasuredCacheHit, s.MeasuredVerdict = cacheHit(p.m.Tokens), string(p.m.Verdict)
		}
		if p.p != nil {
			s.PredictedTTFT, s.PredictedInteractivity = p.p.TTFTP90.Center, p.p.InteractivityP90.Center
			s.PredictedCacheHit, s.PredictedVerdict = cacheHit(p.p.Tokens), string(p.p.Verdict)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sessions < out[j].Sessions })
	return out
}

// Within reports, for TTFT and interactivity, whether the predicted P90
// lies inside the measured step's 95% interval, and whether both exist to
// say so (a step either run did not judge, or judged without a value,
// counts for neither).
func (s StepComparison) Within() (ttft, inter, ttftKnown, interKnown bool) {
	in := func(v, lo, hi float64) (bool, bool) {
		if math.IsNaN(v) || math.IsNaN(lo) || math.IsNaN(hi) {
			return false, false
		}
		return v >= lo && v <= hi, true
	}
	ttft, ttftKnown = in(s.PredictedTTFT, s.MeasuredTTFTLo, s.MeasuredTTFTHi)
	inter, interKnown = in(s.PredictedInteractivity, s.MeasuredInteractivityLo, s.MeasuredInteractivityHi)
	return
}

func cacheHit(t sweep.Tokens) float64 {
	if t.Prompt <= 0 {
		return math.NaN()
	}
	return t.Cached / t.Prompt
}

// relErr is (p - m) / m as a percentage, NaN when either is missing.
func relErr(m, p float64) float64 {
	if math.IsNaN(m) || math.IsNaN(p) || m == 0 {
		return math.NaN()
	}
	return 100 * (p - m) / m
}

// WriteText prints the comparison as a table and the capacity line.
func (c Comparison) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%s (predicted: %s)\n", c.Dir, c.PredictedDir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "sessions\tP90 TTFT s measured\tpredicted\terror\tP90 tok/s/user measured\tpredicted\terror\tcache hit measured\tpredicted\tverdict measured\tpredicted\t")
	for _, s := range c.Steps {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Sessions,
			num(s.MeasuredTTFT, "%.2f"), num(s.PredictedTTFT, "%.2f"), num(relErr(s.MeasuredTTFT, s.PredictedTTFT), "%+.0f%%"),
			num(s.MeasuredInteractivity, "%.1f"), num(s.PredictedInteractivity, "%.1f"), num(relErr(s.MeasuredInteractivity, s.PredictedInteractivity), "%+.0f%%"),
			num(100*s.MeasuredCacheHit, "%.0f%%"), num(100*s.PredictedCacheHit, "%.0f%%"),
			orDash(s.MeasuredVerdict), orDash(s.PredictedVerdict))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c.Stopped != "" {
		fmt.Fprintf(w, "the prediction stopped: %s\n", c.Stopped)
	}
	if c.Error != "" {
		fmt.Fprintf(w, "the prediction failed: %s\n", c.Error)
	}
	if math.IsNaN(c.CapacityError) {
		_, err := fmt.Fprintf(w, "capacity: measured %s, predicted %s; no capacity error: a run that passed no step established none\n",
			capText(c.Measured), capText(c.Predicted))
		return err
	}
	_, err := fmt.Fprintf(w, "capacity: measured %s, predicted %s; error %+.1f sessions (%s ladder steps of %g)\n",
		capText(c.Measured), capText(c.Predicted), c.CapacityError, num(c.CapacitySteps(), "%+.2f"), c.StepSize)
	return err
}

func capText(c sweep.Capacity) string {
	s := fmt.Sprintf("%.1f (%.1f-%.1f)", c.Sessions, c.Lo, c.Hi)
	if c.AtLeast {
		s = fmt.Sprintf(">= %.0f", c.Sessions)
	}
	if c.LimitedBy != "" {
		s += " limited by " + c.LimitedBy
	}
	return s
}

func num(v float64, format string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
