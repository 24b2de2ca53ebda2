package trace

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// tiny is a small valid trace with one subagent, on one line.
const tiny = `{"id":"a","models":["m"],"block_size":64,"hash_id_scope":"local","tool_tokens":1,"system_tokens":2,` +
	`"requests":[{"t":0,"type":"n","model":"m","in":100,"out":5,"hash_ids":[1,2],"think_time":0},` +
	`{"t":3,"type":"subagent","agent_id":"agent_001","subagent_type":"Explore","duration_ms":900,"total_tokens":10,"tool_use_count":1,"status":"completed",` +
	`"requests":[{"t":0,"type":"n","in":70,"out":3,"hash_ids":[1,9],"think_time":0}]},` +
	`{"t":5,"type":"s","in":130,"out":7,"hash_ids":[1,2,3],"think_time":1.5,"ttft":0.25}],"totals":{"x":1}}`

func TestReadFormats(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(tiny + "\n"))
	zw.Close()
	other := strings.Replace(tiny, `"id":"a"`, `"id":"b"`, 1)
	cases := []struct {
		name  string
		input string
		ids   []string
	}{
		// JSONL, the AgentX and Weka corpus layout.
		{"jsonl", tiny + "\n" + other + "\n", []string{"a", "b"}},
		// Blank lines and CRLF endings are fine.
		{"blank lines and CRLF", "\r\n" + tiny + "\r\n\r\n" + other, []string{"a", "b"}},
		// One trace, pretty-printed over many lines.
		{"pretty single trace", indent(tiny), []string{"a"}},
		// A JSON array of traces.
		{"array", "[\n" + tiny + ",\n" + other + "\n]", []string{"a", "b"}},
		// Gzip, recognised by its magic bytes.
		{"gzip", gz.String(), []string{"a"}},
	}
	for _, c := range cases {
		got, err := Read(strings.NewReader(c.input), c.name)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var ids []string
		for _, tr := range got {
			ids = append(ids, tr.ID)
		}
		if !slices.Equal(ids, c.ids) {
			t.Errorf("%s: read ids %v, want %v", c.name, ids, c.ids)
		}
		tr := got[0]
		if len(tr.Requests) != 3 || tr.Requests[1].AgentID != "agent_001" || len(tr.Requests[1].Requests) != 1 ||
			tr.Requests[2].TTFT == nil || *tr.Requests[2].TTFT != 0.25 || string(tr.Totals) != `{"x":1}` {
			t.Errorf("%s: fields lost: %+v", c.name, tr)
		}
	}
}

func indent(s string) string {
	var b bytes.Buffer
	if err := jsonIndent(&b, []byte(s)); err != nil {
		panic(err)
	}
	return b.String()
}

func TestReadErrors(t *testing.T) {
	cases := []struct {
		name  string
		input string
		want  string // a part of the error
	}{
		// A line that is not JSON names its line.
		{"bad line", tiny + "\n{\"id\": \"b\", \"requests\": [\n", "t.jsonl:2: not valid JSON"},
		// A field of the wrong type names the trace and the field.
		{"bad field type", strings.Replace(tiny, `"in":100`, `"in":"100"`, 1), `t.jsonl:1: trace "a": requests.in: is a JSON string, want an integer`},
		// A negative prompt names the request.
		{"negative in", strings.Replace(tiny, `"in":130`, `"in":-5`, 1), `t.jsonl:1: trace "a": requests[2].in: must be >= 0`},
		// A bad subagent call names its path.
		{"negative in in a subagent", strings.Replace(tiny, `"in":70`, `"in":-1`, 1), `requests[1].requests[0].in: must be >= 0`},
		// Negative out and think time.
		{"negative out", strings.Replace(tiny, `"out":5`, `"out":-5`, 1), `requests[0].out: must be >= 0`},
		{"negative think", strings.Replace(tiny, `"think_time":1.5`, `"think_time":-1`, 1), `requests[2].think_time: must be >= 0`},
		// A trace needs an id and requests.
		{"missing id", strings.Replace(tiny, `"id":"a",`, ``, 1), `trace without id: id: missing`},
		{"no requests", `{"id":"x","requests":[]}`, `trace "x": requests: empty`},
		// Ids must be unique.
		{"duplicate id", tiny + "\n" + tiny, `t.jsonl:2: trace "a": id already used on line 1`},
		// A line must be an object.
		{"not an object", "42\n", `t.jsonl:1: a line must hold one JSON trace object`},
		// Nothing at all.
		{"empty", "\n\n", "no traces found"},
		// An empty array.
		{"empty array", "[]", "no traces found"},
		// A broken pretty-printed document gives the line of the fault.
		{"broken document", "{\n\"id\": \"a\",\n\"requests\": [}\n", "t.jsonl:3: not valid JSON"},
		// A broken gzip stream.
		{"broken gzip", "\x1f\x8bxx", "looks gzipped"},
	}
	for _, c := range cases {
		_, err := Read(strings.NewReader(c.input), "t.jsonl")
		if err == nil {
			t.Errorf("%s: no error, want one with %q", c.name, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestReadPathTestdata(t *testing.T) {
	cases := []struct {
		name     string
		path     string
		traces   int
		calls    int // model calls, subagents' included
		subagent bool
	}{
		// Three small real traces, plain JSONL.
		{"jsonl file", "testdata/small.jsonl", 3, 3 + 3 + 5, false},
		// One real trace with two subagents, gzipped single JSON.
		{"gzip file", "testdata/subagent.json.gz", 1, 20 + 5 + 7, true},
		// The folder: both files.
		{"folder", "testdata", 4, 11 + 32, true},
	}
	for _, c := range cases {
		got, err := ReadPath(c.path)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		calls := 0
		for _, tr := range got {
			calls += len(tr.Turns())
			if tr.BlockSize != 64 {
				t.Errorf("%s: trace %q block size %d, want 64", c.name, tr.ID, tr.BlockSize)
			}
		}
		if len(got) != c.traces || calls != c.calls {
			t.Errorf("%s: %d traces with %d calls, want %d with %d", c.name, len(got), calls, c.traces, c.calls)
		}
		if s := Describe(c.name, got); (s.WithSubagents > 0) != c.subagent {
			t.Errorf("%s: with subagents %v, want %v", c.name, s.WithSubagents, c.subagent)
		}
	}
}

func TestReadPathErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "one.jsonl"), []byte(tiny+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "two.json"), []byte(tiny), 0o644)
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("hi"), 0o644)
	cases := []struct {
		name, path, want string
	}{
		// Ids must be unique across files too.
		{"duplicate across files", dir, "id also used in"},
		// A folder without trace files.
		{"no trace files", empty, "holds no .json, .jsonl or .gz files"},
		// A path that does not exist.
		{"missing", filepath.Join(dir, "nope.jsonl"), "no such file"},
	}
	for _, c := range cases {
		_, err := ReadPath(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestWriteJSONLRoundTrip(t *testing.T) {
	in, err := ReadPath("testdata")
	if err != nil {
		t.Fatal(err)
	}
	in = append(in, mustRead(t, tiny)...)
	var a, b bytes.Buffer
	if err := WriteJSONL(&a, in); err != nil {
		t.Fatal(err)
	}
	out, err := Read(bytes.NewReader(a.Bytes()), "written")
	if err != nil {
		t.Fatalf("reading back what WriteJSONL wrote: %v", err)
	}
	if err := WriteJSONL(&b, out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("write, read, write changed the bytes")
	}
	if d1, d2 := Describe("x", in), Describe("x", out); d1 != d2 {
		t.Errorf("stats changed over a round trip: %+v vs %+v", d1, d2)
	}
	// Real traces come back field for field (as generic JSON).
	raw, err := os.ReadFile("testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	written := strings.Split(a.String(), "\n")
	for i, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var orig, back any
		if err := json.Unmarshal([]byte(line), &orig); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(written[i]), &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(orig, back) {
			t.Errorf("testdata trace %d changed over a round trip:\n%s\n%s", i, line, written[i])
		}
	}
}

func mustRead(t *testing.T, s string) []Trace {
	t.Helper()
	tr, err := Read(strings.NewReader(s), "inline")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(tiny))
	f.Add([]byte(tiny + "\n" + strings.Replace(tiny, `"id":"a"`, `"id":"b"`, 1)))
	f.Add([]byte("[" + tiny + "]"))
	f.Add([]byte(indent(tiny)))
	f.Add([]byte(`{"id":"x","requests":[{"t":1,"type":"subagent","requests":[{"t":0,"in":1}]}]}`))
	f.Add([]byte(moon))
	f.Add([]byte(`{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [0, 1, 2], "session_id": "x"}` + "\n" +
		`{"timestamp": 2, "input_length": 7, "output_length": 2, "hash_ids": [0, 1, 3, 4], "session_id": "x"}`))
	small, _ := os.ReadFile("testdata/small.jsonl")
	f.Add(small)
	f.Fuzz(func(t *testing.T, data []byte) {
		traces, err := Read(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		// What reads without error writes and reads back to the same bytes.
		var a, b bytes.Buffer
		if err := WriteJSONL(&a, traces); err != nil {
			t.Fatalf("writing what was read: %v", err)
		}
		again, err := Read(bytes.NewReader(a.Bytes()), "again")
		if err != nil {
			t.Fatalf("reading back what was written: %v\n%s", err, a.Bytes())
		}
		if err := WriteJSONL(&b, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("round trip changed the bytes:\n%s\n%s", a.Bytes(), b.Bytes())
		}
		for _, tr := range again {
			tr.Turns()
			PromptLength(tr)
		}
		Tiers(again)
		Describe("fuzz", again)
	})
}

func jsonIndent(dst *bytes.Buffer, src []byte) error { return json.Indent(dst, src, "", "  ") }
