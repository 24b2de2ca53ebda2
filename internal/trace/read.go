package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Read reads traces from r: JSONL with one trace per line, a single JSON trace
// (one line or pretty-printed), a JSON array of traces, or a Mooncake trace
// (JSONL with one request per line, recognised by its first line having
// input_length and no requests; see mooncakeLine for how its lines become
// traces); gzip is undone when the data starts with gzip's magic bytes. name is used in errors, which name
// the input, the line, the trace and the field, for example
// `traces.jsonl:12: trace "abc": requests[3].in: must be >= 0`.
// A missing block_size is read as 64.
func Read(r io.Reader, name string) ([]Trace, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: looks gzipped but cannot be opened: %v; check the file is complete", name, err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(gzipErrors{zr}, 1<<16)
	}
	rd := reader{name: name, seen: map[string]int{}}
	if err := rd.read(br); err != nil {
		return nil, err
	}
	return rd.traces, nil
}

// ReadPath reads one trace file (.json, .jsonl, either optionally gzipped;
// gzip is recognised by its magic bytes) or every such file in a folder, in
// name order. Trace ids must be unique across all files read.
func ReadPath(path string) ([]Trace, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("trace path: %v; give a trace file or a folder of them", err)
	}
	files := []string{path}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("trace folder %s: %v", path, err)
		}
		files = files[:0]
		for _, e := range entries {
			if e.Type().IsRegular() && isTraceFileName(e.Name()) {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("trace folder %s holds no .json, .jsonl or .gz files; point at a trace file or a folder of them", path)
		}
	}
	var all []Trace
	firstIn := map[string]string{}
	for _, f := range files {
		traces, err := readFile(f)
		if err != nil {
			return nil, err
		}
		for _, t := range traces {
			if prev, dup := firstIn[t.ID]; dup {
				return nil, fmt.Errorf("%s: trace %q: id also used in %s; give each trace a unique id", f, t.ID, prev)
			}
			firstIn[t.ID] = f
		}
		all = append(all, traces...)
	}
	return all, nil
}

// isTraceFileName says whether a folder entry is read as traces: .json,
// .jsonl and .ndjson files, gzipped or not, and any .gz (its content decides).
func isTraceFileName(name string) bool {
	name = strings.ToLower(name)
	for _, ext := range []string{".json", ".jsonl", ".ndjson", ".gz"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

func readFile(path string) ([]Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace file: %v", err)
	}
	defer f.Close()
	return Read(f, path)
}

// WriteJSONL writes traces as JSONL, one trace per line, in the format Read
// reads.
func WriteJSONL(w io.Writer, traces []Trace) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i := range traces {
		if err := enc.Encode(&traces[i]); err != nil {
			return fmt.Errorf("writing trace %q: %w", traces[i].ID, err)
		}
	}
	return bw.Flush()
}

// reader holds the state of one Read call.
type reader struct {
	name   string
	traces []Trace
	seen   map[string]int // trace id -> line it was first seen on
	moon   *mooncake      // set when the input is a Mooncake trace
}

func (rd *reader) read(br *bufio.Reader) error {
	var buf []byte
	lineNo := 0
	first := true
	for {
		line, err := readLine(br, buf[:0])
		buf = line
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s:%d: %v", rd.name, lineNo+1, err)
		}
		if len(line) == 0 && err == io.EOF {
			break
		}
		lineNo++
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 && first && trimmed[0] == '{' && isMooncake(trimmed) {
			rd.moon = newMooncake(rd.name)
		}
		if len(trimmed) > 0 && rd.moon != nil {
			first = false
			if lerr := rd.moon.line(trimmed, lineNo); lerr != nil {
				return lerr
			}
		} else if len(trimmed) > 0 {
			if first && (trimmed[0] == '[' || (trimmed[0] == '{' && !json.Valid(trimmed))) {
				// A JSON array, or a trace spread over several lines.
				rest, rerr := io.ReadAll(br)
				if rerr != nil {
					return fmt.Errorf("%s: %v", rd.name, rerr)
				}
				doc := append(append(bytes.Clone(line), '\n'), rest...)
				if trimmed[0] == '[' || len(trimmed) == 1 || json.Valid(doc) {
					if err := rd.document(doc, lineNo); err != nil {
						return err
					}
					break
				}
				// Not a multi-line document: report the first line as JSONL.
				return rd.line(trimmed, lineNo)
			}
			first = false
			if lerr := rd.line(trimmed, lineNo); lerr != nil {
				return lerr
			}
		}
		if err == io.EOF {
			break
		}
	}
	if rd.moon != nil {
		rd.traces = rd.moon.traces()
		for i := range rd.traces {
			if err := rd.traces[i].check(); err != nil {
				return fmt.Errorf("%s: %s: %v", rd.name, label(rd.traces[i].ID), err)
			}
		}
	}
	if len(rd.traces) == 0 {
		return fmt.Errorf("%s: no traces found; give JSONL with one trace per line or a JSON trace", rd.name)
	}
	return nil
}

// readLine appends the next line of br (without its newline) to buf.
func readLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		part, err := br.ReadSlice('\n')
		buf = append(buf, part...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil {
			buf = buf[:len(buf)-1]
		}
		return buf, err
	}
}

// line decodes one JSONL line holding one trace.
func (rd *reader) line(data []byte, lineNo int) error {
	if data[0] != '{' {
		return fmt.Errorf("%s:%d: a line must hold one JSON trace object, found %q; give JSONL with one trace per line", rd.name, lineNo, clip(data))
	}
	return rd.decode(data, lineNo)
}

// document decodes a JSON value that may span lines: a trace or an array of
// traces. startLine is the line the document starts on.
func (rd *reader) document(doc []byte, startLine int) error {
	lineAt := func(off int64) int { return startLine + bytes.Count(doc[:min(int(off), len(doc))], []byte{'\n'}) }
	dec := json.NewDecoder(bytes.NewReader(doc))
	trimmed := bytes.TrimSpace(doc)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if _, err := dec.Token(); err != nil {
			return rd.syntax(err, lineAt(dec.InputOffset()))
		}
		for dec.More() {
			var raw json.RawMessage
			off := dec.InputOffset()
			if err := dec.Decode(&raw); err != nil {
				var se *json.SyntaxError
				if errors.As(err, &se) {
					return rd.syntax(err, lineAt(se.Offset))
				}
				return rd.syntax(err, lineAt(off))
			}
			if err := rd.decode(bytes.TrimSpace(raw), lineAt(off)+leadingNewlines(doc[off:])); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return rd.syntax(err, lineAt(dec.InputOffset()))
		}
		return nil
	}
	var se *json.SyntaxError
	if err := json.Unmarshal(doc, new(json.RawMessage)); errors.As(err, &se) {
		return rd.syntax(err, lineAt(se.Offset))
	}
	return rd.decode(trimmed, startLine)
}

func leadingNewlines(b []byte) int {
	n := 0
	for _, c := range b {
		switch c {
		case '\n':
			n++
		case ' ', '\t', '\r', ',':
		default:
			return n
		}
	}
	return n
}

func (rd *reader) syntax(err error, line int) error {
	return fmt.Errorf("%s:%d: not valid JSON: %v; fix the file or regenerate it", rd.name, line, err)
}

// decode decodes, checks and stores one trace.
func (rd *reader) decode(data []byte, lineNo int) error {
	var t Trace
	if err := json.Unmarshal(data, &t); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				field = "trace"
			}
			return fmt.Errorf("%s:%d: %s: %s: is a JSON %s, want %s; fix the field's type", rd.name, lineNo, label(t.ID), field, te.Value, jsonKind(te.Type.Kind().String()))
		case errors.As(err, &se):
			return fmt.Errorf("%s:%d: not valid JSON at byte %d of the line: %v; fix or drop the line", rd.name, lineNo, se.Offset, err)
		default:
			return fmt.Errorf("%s:%d: %s: %v", rd.name, lineNo, label(t.ID), err)
		}
	}
	if err := t.check(); err != nil {
		return fmt.Errorf("%s:%d: %s: %v", rd.name, lineNo, label(t.ID), err)
	}
	if prev, dup := rd.seen[t.ID]; dup {
		return fmt.Errorf("%s:%d: %s: id already used on line %d; give each trace a unique id", rd.name, lineNo, label(t.ID), prev)
	}
	rd.seen[t.ID] = lineNo
	if t.BlockSize == 0 {
		t.BlockSize = DefaultBlockSize
	}
	if len(t.Totals) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, t.Totals) == nil {
			t.Totals = b.Bytes()
		}
	}
	shareHashIDs(t.Requests)
	rd.traces = append(rd.traces, t)
	return nil
}

func label(id string) string {
	if id == "" {
		return "trace without id"
	}
	return fmt.Sprintf("trace %q", id)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "ptr":
		return "a number or null"
	}
	return goKind
}

func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// check validates a decoded trace; errors name the field.
func (t *Trace) check() error {
	if t.ID == "" {
		return errors.New("id: missing; give each trace a unique id")
	}
	if t.BlockSize < 0 {
		return fmt.Errorf("block_size: must be > 0, got %d (Weka/AgentX traces use 64)", t.BlockSize)
	}
	if t.ToolTokens < 0 || t.SystemTokens < 0 {
		return errors.New("tool_tokens, system_tokens: must be >= 0")
	}
	if len(t.Requests) == 0 {
		return errors.New("requests: empty; a trace needs at least one request")
	}
	return checkRequests(t.Requests, "requests")
}

func checkRequests(reqs []Request, path string) error {
	for i := range reqs {
		r := &reqs[i]
		at := fmt.Sprintf("%s[%d]", path, i)
		if r.T < 0 {
			return fmt.Errorf("%s.t: must be >= 0, got %g", at, r.T)
		}
		if r.IsSubagent() {
			if r.DurationMS < 0 {
				return fmt.Errorf("%s.duration_ms: must be >= 0, got %g", at, r.DurationMS)
			}
			if err := checkRequests(r.Requests, at+".requests"); err != nil {
				return err
			}
			continue
		}
		switch {
		case r.In < 0:
			return fmt.Errorf("%s.in: must be >= 0, got %d", at, r.In)
		case r.Out < 0:
			return fmt.Errorf("%s.out: must be >= 0, got %d", at, r.Out)
		case r.ThinkTime < 0:
			return fmt.Errorf("%s.think_time: must be >= 0, got %g", at, r.ThinkTime)
		case r.APITime < 0:
			return fmt.Errorf("%s.api_time: must be >= 0, got %g", at, r.APITime)
		case r.TTFT != nil && *r.TTFT < 0:
			return fmt.Errorf("%s.ttft: must be >= 0, got %g", at, *r.TTFT)
		case len(r.Requests) > 0:
			return fmt.Errorf("%s.requests: only a subagent entry (type %q) nests requests, this one has type %q", at, Subagent, r.Type)
		}
	}
	return nil
}

// shareHashIDs lets each request's hash ids share storage with the previous
// request's when they extend them, as prompts of one conversation usually do;
// this keeps a large corpus small in memory. Subagents' lists are done alike.
func shareHashIDs(reqs []Request) {
	var run []int64
	for i := range reqs {
		r := &reqs[i]
		if r.IsSubagent() {
			shareHashIDs(r.Requests)
			continue
		}
		ids := r.HashIDs
		n := len(ids)
		common := min(n, len(run))
		if !slices.Equal(ids[:common], run[:common]) {
			run = ids[:n:n]
			continue
		}
		if n > len(run) {
			run = append(run, ids[len(run):]...)
		}
		r.HashIDs = run[:n:n]
	}
}

// gzipErrors says "gzip" in the errors of a gzip stream, and what a stream
// that ends early means: the line they come on is named by the reader.
type gzipErrors struct{ r io.Reader }

func (g gzipErrors) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	switch {
	case err == nil || err == io.EOF:
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("the gzip stream ends early (%w): the file is truncated; check it was copied or downloaded whole", err)
	default:
		err = fmt.Errorf("gzip: %w; the file is damaged", err)
	}
	return n, err
}
