package rig

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// files are the run directory's streams, appended to as the run goes.
type files struct {
	records, samples, steps *report.JSONL
}

func openFiles(d *report.Dir) (*files, error) {
	var f files
	var err error
	if f.records, err = d.Append("records.jsonl"); err != nil {
		return nil, err
	}
	if f.samples, err = d.Append("metrics.jsonl"); err != nil {
		return nil, err
	}
	if f.steps, err = d.Append("steps.jsonl"); err != nil {
		return nil, err
	}
	return &f, nil
}

func (f *files) flush() {
	f.records.Flush()
	f.samples.Flush()
	f.steps.Flush()
}

// warnings says which values the run directory could not hold.
func (f *files) warnings() []string {
	var out []string
	for _, j := range []*report.JSONL{f.records, f.samples, f.steps} {
		if w := j.Skipped(); w != "" {
			out = append(out, w)
		}
	}
	return out
}

func (f *files) close() {
	f.records.Close()
	f.samples.Close()
	f.steps.Close()
}

// Saved is a run directory read back: everything needed to re-judge it.
type Saved struct {
	Config  config.Run
	Steps   []sweep.StepResult
	Samples []signal.Sample
	Records []load.Record
}

// ReadRun reads a run directory's config, steps, scrapes and records.
func ReadRun(d *report.Dir) (Saved, error) {
	var s Saved
	b, err := os.ReadFile(d.File("config.yaml"))
	if err != nil {
		return s, fmt.Errorf("%s is not a run directory: %w", d.Path(), err)
	}
	if s.Config, err = config.Parse(b, d.File("config.yaml")); err != nil {
		return s, err
	}
	if err := readJSONL(d.File("steps.jsonl"), func(b []byte) error {
		var st sweep.StepResult
		err := json.Unmarshal(b, &st)
		s.Steps = append(s.Steps, st)
		return err
	}); err != nil {
		return s, err
	}
	if err := readJSONL(d.File("metrics.jsonl"), func(b []byte) error {
		var sm signal.Sample
		err := json.Unmarshal(b, &sm)
		s.Samples = append(s.Samples, sm)
		return err
	}); err != nil {
		return s, err
	}
	if s.Records, err = load.ReadRecords(d.File("records.jsonl")); err != nil && !os.IsNotExist(err) {
		return s, err
	}
	return s, nil
}

// readJSONL calls f on each line; a missing file reads as empty, and a torn
// last line (a run killed mid-write) is ignored.
func readJSONL(path string, f func([]byte) error) error {
	fh, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var pending error
	for line := 1; sc.Scan(); line++ {
		if pending != nil {
			return pending
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := f(sc.Bytes()); err != nil {
			pending = fmt.Errorf("%s:%d: %v", path, line, err)
		}
	}
	return sc.Err()
}
