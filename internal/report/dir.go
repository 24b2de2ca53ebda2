// Package report owns the run directory and renders what a run found: the
// summary printed on the terminal and as JSON, and report.md.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/transport"
)

// Dir is one run directory, runs/<recipe>/<timestamp>/. Everything needed to
// re-judge and re-render the run is written into it as the run goes.
type Dir struct {
	path   string
	redact *transport.Redactor
}

// Redact makes every later write pass through r, so no secret the run
// holds reaches a file; nil redacts URL user info only.
func (d *Dir) Redact(r *transport.Redactor) {
	if r == nil {
		r = new(transport.Redactor)
	}
	d.redact = r
}

// NewDir makes a fresh run directory under root.
func NewDir(root, recipe string, now time.Time) (*Dir, error) {
	base := filepath.Join(root, recipe, now.UTC().Format("20060102T150405Z"))
	path := base
	for i := 2; ; i++ {
		err := os.MkdirAll(filepath.Dir(path), 0o755)
		if err == nil {
			err = os.Mkdir(path, 0o755)
		}
		if err == nil {
			return &Dir{path: path}, nil
		}
		if !os.IsExist(err) {
			return nil, fmt.Errorf("make run directory %s: %w (check that the output folder is writable)", path, err)
		}
		path = fmt.Sprintf("%s-%d", base, i)
	}
}

// OpenDir opens an existing run directory.
func OpenDir(path string) (*Dir, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a run directory", path)
	}
	return &Dir{path: path}, nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// File is the path of a file in the directory.
func (d *Dir) File(name string) string { return filepath.Join(d.path, name) }

// WriteFile writes a whole file atomically (temp file, then rename), so a
// killed run never leaves half a file.
func (d *Dir) WriteFile(name string, data []byte) error {
	if d.redact != nil {
		data = d.redact.Bytes(data)
	}
	tmp, err := os.CreateTemp(d.path, "."+name+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), d.File(name))
}

// WriteJSON writes v as indented JSON.
func (d *Dir) WriteJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return d.WriteFile(name, append(b, '\n'))
}

// JSONL appends one JSON value per line to a file of the run directory. It
// is safe for concurrent use. Only whole lines ever reach the file, so a
// killed run leaves no torn line behind; a value that cannot be encoded (a
// NaN, say) is skipped and counted, and never stops later lines.
type JSONL struct {
	mu      sync.Mutex
	name    string
	f       *os.File
	pending bytes.Buffer // whole lines not yet written
	line    bytes.Buffer
	enc     *json.Encoder // encodes into line
	redact  *transport.Redactor
	skipped int
	skipErr error // the first encoding error
	err     error // the first write error: it sticks
}

// flushAt is how many bytes of whole lines are held before they are written.
const flushAt = 256 * 1024

// Append opens name for appending JSON lines.
func (d *Dir) Append(name string) (*JSONL, error) {
	f, err := os.OpenFile(d.File(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	j := &JSONL{name: name, f: f, redact: d.redact}
	j.enc = json.NewEncoder(&j.line)
	return j, nil
}

// Write appends v as one line. A value that cannot be encoded is skipped and
// counted (see Skipped); a failed write sticks and is returned by Flush and
// Close.
func (j *JSONL) Write(v any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return
	}
	j.line.Reset()
	if err := j.enc.Encode(v); err != nil {
		j.skipped++
		if j.skipErr == nil {
			j.skipErr = err
		}
		return
	}
	b := j.line.Bytes()
	if j.redact != nil {
		b = j.redact.Bytes(b)
	}
	j.pending.Write(b)
	if j.pending.Len() >= flushAt {
		j.writeOut()
	}
}

// writeOut writes the pending whole lines in one write.
func (j *JSONL) writeOut() {
	if j.pending.Len() == 0 || j.err != nil {
		return
	}
	if _, err := j.f.Write(j.pending.Bytes()); err != nil {
		j.err = fmt.Errorf("%s: %w", j.name, err)
	}
	j.pending.Reset()
}

// Skipped reports how many values could not be encoded, with the first
// reason, as a warning for the summary; "" when none.
func (j *JSONL) Skipped() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.skipped == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %d values could not be written and were skipped (first: %v)", j.name, j.skipped, j.skipErr)
}

// Flush writes buffered lines to the file.
func (j *JSONL) Flush() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.writeOut()
	return j.err
}

// Close flushes and closes the file.
func (j *JSONL) Close() error {
	err := j.Flush()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadJSONL calls f on each whole line of path; a missing file reads as
// empty. A last line with no newline is torn (the run was killed while
// writing it): it is skipped and warn is told. Any other line f refuses is
// an error naming its line.
func ReadJSONL(path string, warn func(string), f func([]byte) error) error {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer fh.Close()
	br := bufio.NewReaderSize(fh, 1<<20)
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// a line longer than the buffer: gather it whole
			long := append([]byte(nil), b...)
			for err == bufio.ErrBufferFull {
				b, err = br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if err == io.EOF {
			if len(b) > 0 {
				warn(fmt.Sprintf("%s: skipped a torn last line (%d bytes): the run was killed while writing it", filepath.Base(path), len(b)))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if b = bytes.TrimSpace(b); len(b) == 0 {
			continue
		}
		if err := f(b); err != nil {
			return fmt.Errorf("%s:%d: %v (the line is broken before the end of the file: remove it, or re-run the steps it belongs to)", path, line, err)
		}
	}
}
