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

// savedRecord is a records.jsonl line: a request, or the placeholder of one
// still in flight when its step was judged (its outcome is a later line).
type savedRecord struct {
	load.Record
	InFlight bool `json:"in_flight_when_judged,omitempty"`
}

// Load reads a run directory: config.yaml, summary.json, metrics.jsonl and
// records.jsonl.
func Load(path string) (Run, error) {
	r := Run{Dir: path}
	d, err := report.OpenDir(path)
	if err != nil {
		return r, fmt.Errorf("calibrate: %w (give a run directory, runs/<recipe>/<timestamp>)", err)
	}
	b, err := os.ReadFile(d.File("config.yaml"))
	if err != nil {
		return r, fmt.Errorf("calibrate: %s is not a run directory: %w", path, err)
	}
	if r.Config, err = config.Parse(b, d.File("config.yaml")); err != nil {
		return r, fmt.Errorf("calibrate: %w", err)
	}
	if b, err = os.ReadFile(d.File("summary.json")); err != nil {
		return r, fmt.Errorf("calibrate: %w (a run killed before its summary cannot be compared; rebuild it with `headroom judge %s`)", err, path)
	}
	if err := json.Unmarshal(b, &r.Summary); err != nil {
		return r, fmt.Errorf("calibrate: %s: %w", d.File("summary.json"), err)
	}
	if err := readLines(d.File("metrics.jsonl"), &r.Warnings, func(b []byte) error {
		var s signal.Sample
		err := json.Unmarshal(b, &s)
		r.Samples = append(r.Samples, s)
		return err
	}); err != nil {
		return r, fmt.Errorf("calibrate: %w", err)
	}
	if err := readLines(d.File("records.jsonl"), &r.Warnings, func(b []byte) error {
		var s savedRecord
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s.V != load.RecordVersion {
			return fmt.Errorf("record version %d, this build reads %d", s.V, load.RecordVersion)
		}
		if !s.InFlight {
			r.Records = append(r.Records, s.Record)
		}
		return nil
	}); err != nil {
		return r, fmt.Errorf("calibrate: %w", err)
	}
	if len(r.Records) == 0 {
		return r, fmt.Errorf("calibrate: %s has no records (records.jsonl is missing or empty): nothing to fit", path)
	}
	sort.SliceStable(r.Records, func(i, j int) bool { return r.Records[i].Send < r.Records[j].Send })
	return r, nil
}

// readLines calls f on each line of path (report.ReadJSONL) and warns of
// a missing file or a torn last line.
func readLines(path string, warnings *[]string, f func([]byte) error) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		*warnings = append(*warnings, path+" is missing")
		return nil
	}
	return report.ReadJSONL(path, func(w string) { *warnings = append(*warnings, w) }, f)
}
