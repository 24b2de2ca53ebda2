// Package report owns the run directory and renders what a run found: the
// summary printed on the terminal and as JSON, and report.md.
package report

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/transport"
)

// Dir is one run directory, runs/<recipe>/<timestamp>/. Everything needed to
// re-judge and re-render the run is written into it as the run goes.
type Dir struct {
	path   string
	redact *transport.Redactor
	quota  *quota
}

// FailAfter makes the directory behave as a disk that fills once n more
// bytes are written to it, every file together: the write that crosses it
// writes what fits and fails with err (a full disk's ENOSPC, say). For
// tests and rehearsals of a full disk.
func (d *Dir) FailAfter(n int64, err error) { d.quota = &quota{left: n, err: err} }

// quota is the room FailAfter left; nil is no limit.
type quota struct {
	mu   sync.Mutex
	left int64
	err  error
}

// write writes b to w as far as the quota lets it.
func (q *quota) write(w *os.File, b []byte) (int, error) {
	if q == nil {
		return w.Write(b)
	}
	q.mu.Lock()
	k := min(int64(len(b)), q.left)
	q.left -= k
	q.mu.Unlock()
	n, err := w.Write(b[:k])
	if err == nil && n < len(b) {
		err = &fs.PathError{Op: "write", Path: w.Name(), Err: q.err}
	}
	return n, err
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
	fail := func(err error) error { return &WriteError{File: d.File(name), Err: err} }
	tmp, err := os.CreateTemp(d.path, "."+name+".*")
	if err != nil {
		return fail(err)
	}
	if _, err := d.quota.write(tmp, data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), d.File(name)); err != nil {
		os.Remove(tmp.Name())
		return fail(err)
	}
	return nil
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
	size    int64 // bytes of whole lines in the file
	quota   *quota
}

// flushAt is how many bytes of whole lines are held before they are written.
const flushAt = 256 * 1024

// Append opens name for appending JSON lines.
func (d *Dir) Append(name string) (*JSONL, error) {
	f, err := os.OpenFile(d.File(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	j := &JSONL{name: name, f: f, redact: d.redact, size: st.Size(), quota: d.quota}
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

// writeOut writes the pending whole lines in one write. A write that fails
// (a full disk) may have put part of them in the file: the file is cut back
// to its last whole line, so what a failed run leaves reads as what it
// wrote whole, never as a torn line a kill left.
func (j *JSONL) writeOut() {
	if j.pending.Len() == 0 || j.err != nil {
		return
	}
	n, err := j.quota.write(j.f, j.pending.Bytes())
	if err != nil {
		j.err = &WriteError{File: j.f.Name(), Err: err}
		if n > 0 {
			if terr := j.f.Truncate(j.size); terr != nil {
				j.err = &WriteError{File: j.f.Name(), Err: fmt.Errorf("%w; cutting the torn line back failed too: %v", err, terr)}
			}
		}
	} else {
		j.size += int64(n)
	}
	j.pending.Reset()
}

// WriteError is a write to the run directory that failed: the run stops
// at the first one, since what it would go on to say could not be kept.
type WriteError struct {
	File string
	Err  error
}

func (e *WriteError) Error() string {
	msg := e.Err.Error()
	if pe, ok := e.Err.(*fs.PathError); ok {
		msg = pe.Err.Error()
	}
	return fmt.Sprintf("could not write %s: %s (the run stops here: free space or pick another output folder)", e.File, msg)
}
func (e *WriteError) Unwrap() error { return e.Err }

// Err is the first write error, nil while every write went through.
func (j *JSONL) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
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

// RecordsFile is the file shard k's records are in: records.jsonl for the
// coordinator (and every unsharded run), records-shard-K.jsonl for shard
// K of a sharded sweep.
func RecordsFile(k int) string {
	if k == 0 {
		return "records.jsonl"
	}
	return fmt.Sprintf("records-shard-%d.jsonl", k)
}

// RecordFiles is every records file in d, records.jsonl first, then the
// shards' in shard order: what a reader of the run's requests reads. A
// shard that wrote nothing (no lanes at any step, or lost before its first
// record) has no file; the shards after it still count.
func (d *Dir) RecordFiles() []string {
	type shardFile struct {
		k    int
		name string
	}
	var shards []shardFile
	matches, _ := filepath.Glob(d.File("records-shard-*.jsonl"))
	for _, m := range matches {
		name := filepath.Base(m)
		var k int
		if _, err := fmt.Sscanf(name, "records-shard-%d.jsonl", &k); err == nil && k > 0 && name == RecordsFile(k) {
			shards = append(shards, shardFile{k, name})
		}
	}
	slices.SortFunc(shards, func(a, b shardFile) int { return cmp.Compare(a.k, b.k) })
	out := []string{RecordsFile(0)}
	for _, s := range shards {
		out = append(out, s.name)
	}
	return out
}

// openRecords reads every records file in d as one stream; ok is false
// when d has no records.jsonl.
func (d *Dir) openRecords() (r io.ReadCloser, ok bool, err error) {
	var files []io.Reader
	var closers []io.Closer
	for i, name := range d.RecordFiles() {
		f, err := os.Open(d.File(name))
		if i == 0 && errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		if err != nil {
			for _, c := range closers {
				c.Close()
			}
			return nil, false, err
		}
		files, closers = append(files, f), append(closers, f)
	}
	return multiCloser{Reader: io.MultiReader(files...), closers: closers}, true, nil
}

type multiCloser struct {
	io.Reader
	closers []io.Closer
}

func (m multiCloser) Close() error {
	var errs []error
	for _, c := range m.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
