package record

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"

	"github.com/headroom-bench/headroom/internal/trace"
)

// encodeTrace writes one trace as a JSONL line, or as a gzip member holding
// that line: members concatenated are one gzip stream, so every trace is
// one complete write and a file cut after any of them reads whole.
func encodeTrace(t trace.Trace, gz bool) ([]byte, error) {
	var line bytes.Buffer
	if err := trace.WriteJSONL(&line, []trace.Trace{t}); err != nil {
		return nil, err
	}
	if !gz {
		return line.Bytes(), nil
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(line.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// File is a recording on disk. A write that fails (a full disk) is undone
// by truncating the file back to the end of the last whole trace, so the
// file stays readable and later traces can still be written.
type File struct {
	f    *os.File
	good int64 // bytes up to the end of the last whole trace
	size int64
}

// CreateFile opens path for a recording: a new file, or with appendTo an
// existing one that more traces are added to.
func CreateFile(path string, appendTo bool) (*File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if !appendTo {
		flags |= os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		if os.IsExist(err) {
			return nil, fmt.Errorf("%s exists: give --append to add to it, or another -o", path)
		}
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, good: info.Size(), size: info.Size()}, nil
}

func (f *File) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	f.size += int64(n)
	return n, err
}

// Mark records that the file ends with a whole trace.
func (f *File) Mark() error { f.good = f.size; return nil }

// Rewind cuts the file back to its last whole trace.
func (f *File) Rewind() error {
	if err := f.f.Truncate(f.good); err != nil {
		return err
	}
	f.size = f.good
	return nil
}

// Close flushes the file to disk and closes it.
func (f *File) Close() error {
	serr := f.f.Sync()
	if err := f.f.Close(); err != nil {
		return err
	}
	return serr
}
