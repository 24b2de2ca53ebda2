package rig

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/report"
)

// repairRun readies a killed run's directory for --resume. It cuts a torn
// last line off steps.jsonl, records.jsonl and metrics.jsonl, so that what
// is appended next starts on a line of its own, and drops the records and
// scrapes of the step the kill interrupted (everything after the last step
// steps.jsonl holds), so that step runs again whole and nothing is counted
// twice. It returns what it did, one warning per change.
func repairRun(d *report.Dir) ([]string, error) {
	var notes []string
	lastIndex, lastEnd := -1, time.Duration(-1)
	n, torn, err := filterJSONL(d.File("steps.jsonl"), func(b []byte) bool {
		var st struct {
			Index int     `json:"index"`
			End   float64 `json:"end_s"`
		}
		if json.Unmarshal(b, &st) != nil {
			return false
		}
		lastIndex, lastEnd = st.Index, time.Duration(st.End*float64(time.Second))
		return true
	})
	if err != nil {
		return nil, err
	}
	notes = append(notes, tornNote("steps.jsonl", torn)...)
	if n > 0 {
		notes = append(notes, fmt.Sprintf("steps.jsonl: dropped %d lines that do not parse", n))
	}
	records := 0
	for _, name := range d.RecordFiles() { // a sharded sweep's, each shard's
		n, torn, err := filterJSONL(d.File(name), func(b []byte) bool {
			var r struct {
				Step int `json:"step"`
			}
			return json.Unmarshal(b, &r) == nil && r.Step <= lastIndex
		})
		if err != nil {
			return nil, err
		}
		records += n
		notes = append(notes, tornNote(name, torn)...)
	}
	scrapes, torn, err := filterJSONL(d.File("metrics.jsonl"), func(b []byte) bool {
		var s struct {
			At time.Duration `json:"at"`
		}
		return json.Unmarshal(b, &s) == nil && s.At <= lastEnd
	})
	if err != nil {
		return nil, err
	}
	notes = append(notes, tornNote("metrics.jsonl", torn)...)
	if records+scrapes > 0 {
		notes = append(notes, fmt.Sprintf("dropped %d records and %d scrapes of step %d, which the kill interrupted: it runs again whole", records, scrapes, lastIndex+2))
	}
	return notes, nil
}

func tornNote(name string, torn int) []string {
	if torn == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: cut a torn last line (%d bytes) the killed run left behind", name, torn)}
}

// filterJSONL keeps the whole lines of path that keep accepts, in order,
// and cuts a torn last line (one with no newline). It rewrites the file
// (a temporary file, then a rename) only when something goes; it returns
// how many whole lines went and how many bytes the torn line held. A
// missing file is left missing.
func filterJSONL(path string, keep func([]byte) bool) (dropped, torn int, err error) {
	in, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, 0, fmt.Errorf("repair %s: %w (is the run directory writable?)", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return 0, 0, fmt.Errorf("repair %s: %w", path, err)
	}
	out := bufio.NewWriterSize(tmp, 1<<20)
	br := bufio.NewReaderSize(in, 1<<20)
	for {
		line, rerr := br.ReadBytes('\n')
		if rerr == io.EOF {
			torn = len(line)
			break
		}
		if rerr != nil {
			tmp.Close()
			return 0, 0, fmt.Errorf("read %s: %w", path, rerr)
		}
		if b := bytes.TrimSpace(line); len(b) > 0 && !keep(b) {
			dropped++
			continue
		}
		out.Write(line)
	}
	if err := out.Flush(); err != nil {
		tmp.Close()
		return 0, 0, fmt.Errorf("repair %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return 0, 0, fmt.Errorf("repair %s: %w", path, err)
	}
	if dropped == 0 && torn == 0 {
		return 0, 0, nil
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, 0, fmt.Errorf("repair %s: %w", path, err)
	}
	return dropped, torn, nil
}

// readResume mends a killed run's directory (see repairRun) and reads it
// back for --resume, with what was mended as notes. The saved steps are
// judged again from their scrapes and records, as `judge` does, so a repeat
// of one of them pools its windows as it would have in one run.
func readResume(d *report.Dir) (Saved, []string, error) {
	notes, err := repairRun(d)
	if err != nil {
		return Saved{}, nil, fmt.Errorf("--resume %s: %w", d.Path(), err)
	}
	saved, err := ReadRun(d)
	if err != nil {
		return saved, notes, err
	}
	if lost := saved.Config.RedactedCredentials(); len(lost) > 0 {
		return saved, notes, fmt.Errorf("--resume %s: the saved run file's %s carried credentials in the URL (user:password@), which are never written, so the resumed run could not reach them; move them to recipe.api_key_env, recipe.headers or recipe.metrics_auth (read from the environment) for the next run, and run it afresh",
			d.Path(), strings.Join(lost, ", "))
	}
	// the measurement does not need them: resume without posting to a URL
	// the first run was not given
	var lost []string
	if saved.Config, lost = saved.Config.WithoutRedactedNotify(); len(lost) > 0 {
		notes = append(notes, fmt.Sprintf("the saved run file's %s was redacted when it was written (a webhook's path, or user info in the URL, is its secret), so the resumed run does not post there; pass it again in a fresh run", strings.Join(lost, ", ")))
	}
	notes = append(notes, saved.Warnings...)
	saved.Steps = rejudge(SweepPlan(saved.Config), saved)
	return saved, notes, nil
}
