// Package calibrate fits a simulated engine profile (prefill and decode
// rates, KV capacity, cache blocks, the fixed cost of an iteration) to what
// real run directories measured, and checks the fit by re-running each
// recipe against the fitted profile and comparing the steps.
package calibrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/signal"
)

// Run is one run directory read for calibration: its run file, summary,
// scrapes and the final record of every request.
type Run struct {
	Dir     string
	Config  config.Run
	Summary report.Summary
	Samples []signal.Sample
	// Records are the requests' outcomes (a request still in flight when its
	// step was judged has its later outcome here), sorted by send time.
	Records []load.Record
	// Warnings say what could not be read.
	Warnings []string
}

// Load reads a run directory: config.yaml, summary.json, metrics.jsonl and
// records.jsonl.
func Load(path string) (Run, error) {
	r := Run{Dir: path}
	d, err := report.OpenDir(path)
	if err != nil {
		return r, fmt.Errorf("calibrate: %w (give a run directory, runs/<recipe>/<timestamp>)", err)
	}
	saved, err := rig.ReadRun(d)
	if err != nil {
		return r, fmt.Errorf("calibrate: %w", err)
	}
	for _, name := range []string{"metrics.jsonl", "records.jsonl"} {
		if _, err := os.Stat(d.File(name)); errors.Is(err, fs.ErrNotExist) {
			r.Warnings = append(r.Warnings, d.File(name)+" is missing")
		}
	}
	r.Config, r.Samples, r.Records = saved.Config, saved.Samples, saved.Outcomes
	r.Warnings = append(r.Warnings, saved.Warnings...)
	b, err := os.ReadFile(d.File("summary.json"))
	if err != nil {
		return r, fmt.Errorf("calibrate: %w (a run killed before its summary cannot be compared; rebuild it with `headroom judge %s`)", err, path)
	}
	if err := json.Unmarshal(b, &r.Summary); err != nil {
		return r, fmt.Errorf("calibrate: %s: %w", d.File("summary.json"), err)
	}
	if len(r.Records) == 0 {
		return r, fmt.Errorf("calibrate: %s has no records (records.jsonl is missing or empty): nothing to fit", path)
	}
	sort.SliceStable(r.Records, func(i, j int) bool { return r.Records[i].Send < r.Records[j].Send })
	return r, nil
}
