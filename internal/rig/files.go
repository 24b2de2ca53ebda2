package rig

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"sync"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// files are the run directory's streams, appended to as the run goes.
type files struct {
	records, samples, steps *report.JSONL
	d                       *report.Dir
	// shards are records-shard-K.jsonl, the records shard K of a sharded
	// sweep sent, opened as they come
	shardMu sync.Mutex
	shards  map[int]*report.JSONL
	openErr error
}

// record is the stream shard k's records go to.
func (f *files) record(k int) *report.JSONL {
	if k == 0 {
		return f.records
	}
	f.shardMu.Lock()
	defer f.shardMu.Unlock()
	if j := f.shards[k]; j != nil {
		return j
	}
	j, err := f.d.Append(report.RecordsFile(k))
	if err != nil {
		// the first failure is the run's error (err); the records go to
		// records.jsonl, marked with their shard, rather than nowhere
		if f.openErr == nil {
			f.openErr = err
		}
		return f.records
	}
	if f.shards == nil {
		f.shards = map[int]*report.JSONL{}
	}
	f.shards[k] = j
	return j
}

// streams is every stream open now.
func (f *files) streams() []*report.JSONL {
	out := []*report.JSONL{f.records, f.samples, f.steps}
	f.shardMu.Lock()
	defer f.shardMu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(f.shards)) {
		out = append(out, f.shards[k])
	}
	return out
}

func openFiles(d *report.Dir) (*files, error) {
	f := files{d: d}
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

// versionFile is version.json, written as a run directory is opened: the
// headroom build that writes the run, so a run killed before its summary
// still says what made it. Resuming keeps the first build and adds its own.
type versionFile struct {
	Headroom string   `json:"headroom"`
	Go       string   `json:"go"`
	Records  int      `json:"records"`
	Summary  int      `json:"summary"`
	Resumed  []string `json:"resumed_by,omitempty"`
}

// stampVersion writes or extends version.json in d for this build.
func stampVersion(d *report.Dir, version string) error {
	if version == "" {
		version = "unknown"
	}
	v := versionFile{Headroom: version, Go: runtime.Version(), Records: load.RecordVersion, Summary: report.SummaryVersion}
	if b, err := os.ReadFile(d.File("version.json")); err == nil {
		var prev versionFile
		if json.Unmarshal(b, &prev) == nil && prev.Headroom != "" {
			prev.Resumed = append(prev.Resumed, version)
			v = prev
		}
	}
	return d.WriteJSON("version.json", v)
}

// flush writes every stream out; it returns the first write that failed.
func (f *files) flush() error {
	var errs []error
	for _, j := range f.streams() {
		errs = append(errs, j.Flush())
	}
	return errors.Join(errs...)
}

// err is the first write to the streams that failed, nil while all went
// through.
func (f *files) err() error {
	f.shardMu.Lock()
	errs := []error{f.openErr}
	f.shardMu.Unlock()
	for _, j := range f.streams() {
		errs = append(errs, j.Err())
	}
	return errors.Join(errs...)
}

// keepStep writes a judged step after the records and scrapes it was
// judged on: if any of them could not be written the step is not, so the
// directory never holds a step `judge` would read otherwise.
func (f *files) keepStep(s sweep.StepResult) error {
	if err := f.flush(); err != nil {
		return err
	}
	f.steps.Write(s)
	return f.steps.Flush()
}

// warnings says which values the run directory could not hold.
func (f *files) warnings() []string {
	var out []string
	for _, j := range f.streams() {
		if w := j.Skipped(); w != "" {
			out = append(out, w)
		}
	}
	return out
}

func (f *files) close() {
	for _, j := range f.streams() {
		j.Close()
	}
}

// Saved is a run directory read back: everything needed to re-judge it.
type Saved struct {
	Config  config.Run
	Steps   []sweep.StepResult
	Samples []signal.Sample
	// Records are the requests as their steps were judged: one still in
	// flight when its step was judged reads as in flight (see judgedView),
	// and its outcome, which came later, is left out.
	Records []load.Record
	// Outcomes are every request's final record, in file order: a request
	// in flight when its step was judged appears with its later outcome.
	Outcomes []load.Record
	// Warnings say what could not be read: a torn last line a killed run
	// left behind is skipped.
	Warnings []string
}

// savedRecord is one line of records.jsonl: a request's record. A request
// still in flight when its step was judged has two lines: the one its step
// was judged on (InFlight: as it was sent, no outcome), written with the
// step, and its outcome once it finished (Late), which judging skips; so
// `judge` sees the step as the live run did.
type savedRecord struct {
	load.Record
	InFlight bool `json:"in_flight_when_judged,omitempty"`
	Late     bool `json:"finished_after_judging,omitempty"`
}

// judgedView is a record as its step was judged: a request in flight then
// is sent and unfinished, with no outcome yet.
func judgedView(r savedRecord) load.Record {
	rec := r.Record
	if !r.InFlight {
		return rec
	}
	rec.ServedPromptTokens, rec.CachedTokens, rec.OutputTokens = 0, 0, 0
	rec.ReasoningTokens, rec.ReasoningChunks, rec.AnswerChunks = 0, 0, 0
	rec.FirstToken, rec.LastToken, rec.FirstAnswer = 0, 0, 0
	rec.Status, rec.Error, rec.Detail = 0, "", ""
	rec.Pending = true
	return rec
}

// ReadRun reads a run directory's config, steps, scrapes and records. It
// changes nothing: a torn last line (a run killed mid-write) is skipped with
// a warning; a line that does not parse before the end is an error.
func ReadRun(d *report.Dir) (Saved, error) {
	var s Saved
	b, err := os.ReadFile(d.File("config.yaml"))
	if err != nil {
		return s, fmt.Errorf("%s is not a run directory: %w", d.Path(), err)
	}
	if s.Config, err = config.Parse(b, d.File("config.yaml")); err != nil {
		return s, err
	}
	warn := func(w string) { s.Warnings = append(s.Warnings, w) }
	if err := report.ReadJSONL(d.File("steps.jsonl"), warn, func(b []byte) error {
		var st sweep.StepResult
		err := json.Unmarshal(b, &st)
		s.Steps = append(s.Steps, st)
		return err
	}); err != nil {
		return s, err
	}
	if err := report.ReadJSONL(d.File("metrics.jsonl"), warn, func(b []byte) error {
		var sm signal.Sample
		err := json.Unmarshal(b, &sm)
		s.Samples = append(s.Samples, sm)
		return err
	}); err != nil {
		return s, err
	}
	// a sharded sweep's records are in a file per shard: all of them
	for _, name := range d.RecordFiles() {
		if err := report.ReadJSONL(d.File(name), warn, func(b []byte) error {
			var r savedRecord
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			if r.V != load.RecordVersion {
				return fmt.Errorf("record version %d, this build reads %d", r.V, load.RecordVersion)
			}
			if !r.Late {
				s.Records = append(s.Records, judgedView(r))
			}
			if !r.InFlight {
				s.Outcomes = append(s.Outcomes, r.Record)
			}
			return nil
		}); err != nil {
			return s, fmt.Errorf("%s: %w", name, err)
		}
	}
	return s, nil
}
