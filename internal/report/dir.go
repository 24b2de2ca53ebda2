// Package report owns the run directory and renders what a run found: the
// summary printed on the terminal and as JSON, and report.md.
package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
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
// is safe for concurrent use; Flush makes what was written durable.
type JSONL struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

// Append opens name for appending JSON lines.
func (d *Dir) Append(name string) (*JSONL, error) {
	f, err := os.OpenFile(d.File(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 256*1024)
	var out io.Writer = w
	if d.redact != nil {
		// json.Encoder writes each value in one Write, so a line is
		// redacted whole.
		out = d.redact.Writer(w)
	}
	return &JSONL{f: f, w: w, enc: json.NewEncoder(out)}, nil
}

// Write appends v as one line; the first error sticks and is returned by Close.
func (j *JSONL) Write(v any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = j.enc.Encode(v)
	}
}

// Flush writes buffered lines to the file.
func (j *JSONL) Flush() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = j.w.Flush()
	}
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
