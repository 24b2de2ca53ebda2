// Package transfer is the transfer study: a profile fitted to recorded runs
// of a server that is not ours predicts other recorded runs on it (another
// workload, ladder or engine setting), and the study says how close each
// prediction comes (`headroom sim study transfer`).
package transfer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/headroom-bench/headroom/internal/calibrate"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// Case is one prediction of the transfer study: a profile fitted
// to the Calibrate run directories predicts the Measured one's recipe.
type Case struct {
	Name      string   `json:"name"`
	Calibrate []string `json:"calibrate"` // run directories, relative to the cases file
	Measured  string   `json:"measured"`
	// Gate makes the study's fast form (go test) fail when this case's
	// prediction is more than one ladder step off or its interval misses
	// the measured capacity: set on the cases the model is known to hold,
	// so they keep holding.
	Gate bool `json:"gate,omitempty"`
}

// Row is a case's outcome: the capacity predicted on the fitted
// profile with its interval widened by the fit's own uncertainty (the
// predictions on the profile moved 1.96 standard errors slower and
// faster, and with the other answer to a question the runs left at its
// prior: whether the engine's TTFT counts queue time), against the one
// measured.
type Row struct {
	Case       string         `json:"case"`
	Predicted  float64        `json:"predicted"`
	Lo         float64        `json:"lo"`
	Hi         float64        `json:"hi"`
	Measured   sweep.Capacity `json:"measured"`
	StepSize   float64        `json:"step_size"`
	ErrorSteps float64        `json:"error_steps"` // predicted minus measured, in ladder steps
	Covered    bool           `json:"covered"`
	// TTFTWithin and InteractivityWithin count the measured steps whose
	// predicted P90 (on the fitted profile itself) lies inside the step's
	// measured 95% interval, of those both runs judged with a value.
	TTFTWithin          [2]int `json:"ttft_within"`
	InteractivityWithin [2]int `json:"interactivity_within"`
	Note                string `json:"note,omitempty"`
}

// MarshalJSON writes the row with its non-finite numbers as strings, as
// stats.Number does: a case whose measured run established no capacity has
// no error ("NaN"), and an interval can be open ("+Inf"); JSON has neither.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	return json.Marshal(struct {
		plain
		Predicted  stats.Number `json:"predicted"`
		Lo         stats.Number `json:"lo"`
		Hi         stats.Number `json:"hi"`
		StepSize   stats.Number `json:"step_size"`
		ErrorSteps stats.Number `json:"error_steps"`
	}{plain(r), stats.Number(r.Predicted), stats.Number(r.Lo), stats.Number(r.Hi), stats.Number(r.StepSize), stats.Number(r.ErrorSteps)})
}

// LoadCases reads a cases file (YAML: a list of Case) and
// makes its run directories absolute.
func LoadCases(path string) ([]Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("transfer cases: %w", err)
	}
	var cs []Case
	if err := yaml.UnmarshalStrict(b, &cs); err != nil {
		return nil, fmt.Errorf("transfer cases %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for i := range cs {
		c := &cs[i]
		if c.Name == "" || c.Measured == "" || len(c.Calibrate) == 0 {
			return nil, fmt.Errorf("transfer cases %s: case %d needs name, calibrate and measured", path, i+1)
		}
		for j := range c.Calibrate {
			c.Calibrate[j] = relativeTo(dir, c.Calibrate[j])
		}
		c.Measured = relativeTo(dir, c.Measured)
	}
	return cs, nil
}

// relativeTo reads a run directory named in a cases file: relative to the
// file's folder, or as given when absolute.
func relativeTo(dir, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// Measure fits and predicts every case, the predicted runs' directories
// under out.
func Measure(ctx context.Context, cases []Case, out string, run calibrate.Runner) ([]Row, error) {
	var rows []Row
	for _, c := range cases {
		r, err := transferCase(ctx, c, out, run)
		if err != nil {
			return rows, fmt.Errorf("transfer case %s: %w", c.Name, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func transferCase(ctx context.Context, c Case, out string, run calibrate.Runner) (Row, error) {
	row := Row{Case: c.Name}
	var runs []calibrate.Run
	for _, d := range c.Calibrate {
		r, err := calibrate.Load(d)
		if err != nil {
			return row, err
		}
		runs = append(runs, r)
	}
	fit, err := calibrate.FitProfile(runs)
	if err != nil {
		return row, err
	}
	measured, err := calibrate.Load(c.Measured)
	if err != nil {
		return row, err
	}
	dir := filepath.Join(out, safeName(c.Name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return row, err
	}
	var caps []sweep.Capacity
	var cmp calibrate.Comparison
	type variant struct {
		name    string
		profile sim.Profile
	}
	variants := []variant{{"+0.00", fit.Shifted(0)}, {"-1.96", fit.Shifted(-1.96)}, {"+1.96", fit.Shifted(1.96)}}
	q, ok := fit.Param("ttft_from_admission")
	bothWays := ok && q.Status == calibrate.Prior
	if bothWays {
		// what the runs cannot tell is predicted both ways: a calibration run
		// that never queued cannot say whether the engine's TTFT counts queue
		// time (llm-d-inference-sim's does not), and a prediction that queues
		// depends on it
		p := fit.Profile
		p.TTFTFromAdmission = !p.TTFTFromAdmission
		name := "+0.00-ttft-counts-queue"
		if p.TTFTFromAdmission {
			name = "+0.00-ttft-from-admission"
		}
		variants = append(variants, variant{name, p})
	}
	for i, v := range variants {
		f := fit
		f.Profile = v.profile
		path := filepath.Join(dir, "profile"+v.name+".yaml")
		b, err := f.ProfileYAML(c.Calibrate)
		if err != nil {
			return row, err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return row, err
		}
		cfg, err := calibrate.PredictConfig(measured, path, fit.Personality, dir)
		if err != nil {
			return row, err
		}
		got, err := calibrate.Predict(ctx, measured, cfg, run)
		if err != nil {
			return row, err
		}
		if i == 0 {
			cmp = got
		}
		caps = append(caps, got.Predicted)
	}
	row.Measured, row.StepSize = measured.Summary.Capacity, cmp.StepSize
	row.Predicted, row.Lo, row.Hi = caps[0].Sessions, math.Inf(1), math.Inf(-1)
	for _, k := range caps {
		row.Lo, row.Hi = math.Min(row.Lo, k.Lo), math.Max(row.Hi, k.Hi)
	}
	row.ErrorSteps = cmp.CapacitySteps()
	for _, st := range cmp.Steps {
		t, in, tk, ik := st.Within()
		row.TTFTWithin = count(row.TTFTWithin, t, tk)
		row.InteractivityWithin = count(row.InteractivityWithin, in, ik)
	}
	m := row.Measured.Sessions
	// an interval from a prediction that established nothing (0 to the
	// first step that missed) covers by saying nothing
	row.Covered = !row.Measured.NotEstablished && !caps[0].NotEstablished && m >= row.Lo && m <= row.Hi
	var notes []string
	if row.Measured.AtLeast {
		notes = append(notes, "measured is a lower bound")
	}
	if caps[0].AtLeast {
		notes = append(notes, "predicted is a lower bound")
	}
	if caps[0].NotEstablished {
		notes = append(notes, "the prediction established no capacity: no predicted step held")
	}
	if row.Measured.NotEstablished {
		notes = append(notes, "the measured run established none: no step held")
	}
	if bothWays {
		notes = append(notes, "queue time in the TTFT not identified: predicted both ways")
	}
	row.Note = strings.Join(notes, "; ")
	return row, nil
}

// count adds one judged comparison (known) to a within/of pair.
func count(c [2]int, within, known bool) [2]int {
	if known {
		c[1]++
		if within {
			c[0]++
		}
	}
	return c
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, s)
}

// WriteTable writes the rows as a Markdown table: case, predicted
// (with its interval), measured, error in ladder steps, covered.
func WriteTable(w io.Writer, rows []Row) error {
	fmt.Fprintln(w, "| case | predicted (interval with the fit's uncertainty) | measured (95% interval) | error | covered | steps whose predicted P90 lies in the measured interval: TTFT, tok/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rows {
		errText := "-"
		if !math.IsNaN(r.ErrorSteps) {
			errText = fmt.Sprintf("%+.2f steps of %g", r.ErrorSteps, r.StepSize)
		}
		covered := "no"
		if r.Covered {
			covered = "yes"
		}
		var m string
		switch {
		case r.Measured.NotEstablished:
			m = fmt.Sprintf("not established (%.1f-%.1f)", r.Measured.Lo, r.Measured.Hi)
		case r.Measured.AtLeast:
			m = fmt.Sprintf(">= %.1f (every step held)", r.Measured.Sessions)
		case r.Measured.HiOpen:
			m = fmt.Sprintf("%.1f (%.1f->=%.1f: nothing above was measured)", r.Measured.Sessions, r.Measured.Lo, r.Measured.Hi)
		default:
			m = fmt.Sprintf("%.1f (%.1f-%.1f)", r.Measured.Sessions, r.Measured.Lo, r.Measured.Hi)
		}
		if r.Note != "" {
			covered += " (" + r.Note + ")"
		}
		line := fmt.Sprintf("| %s | %.1f (%.1f-%.1f) | %s | %s | %s | %d of %d, %d of %d |", r.Case, r.Predicted, r.Lo, r.Hi, m, errText, covered,
			r.TTFTWithin[0], r.TTFTWithin[1], r.InteractivityWithin[0], r.InteractivityWithin[1])
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
