package trace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// moon is a small Mooncake trace: conversations A (lines 1, 3, 6) and B
// (lines 2, 4) grow by extending their previous prompt's full blocks; line 5
// shares only the common first block and so stands alone.
const moon = `{"timestamp": 0, "input_length": 1800, "output_length": 40, "hash_ids": [0, 1, 2, 3]}
{"timestamp": 0, "input_length": 1100, "output_length": 7, "hash_ids": [0, 4, 5]}
{"timestamp": 3000, "input_length": 2300, "output_length": 12, "hash_ids": [0, 1, 2, 7, 8]}
{"timestamp": 3000, "input_length": 1200, "output_length": 9, "hash_ids": [0, 4, 9]}
{"timestamp": 6000, "input_length": 700, "output_length": 3, "hash_ids": [0, 10]}
{"timestamp": 6500, "input_length": 2900, "output_length": 30, "hash_ids": [0, 1, 2, 7, 8, 11]}
`

func TestReadMooncake(t *testing.T) {
	type conv struct {
		id     string
		starts []float64
		thinks []float64
		ins    []int
	}
	cases := []struct {
		name  string
		input string
		want  []conv
	}{
		// Conversations are found from their growing hash-id prefixes.
		{"prefix chains", moon, []conv{
			{"m.jsonl:1", []float64{0, 3, 6.5}, []float64{0, 3, 3.5}, []int{1800, 2300, 2900}},
			{"m.jsonl:2", []float64{0, 3}, []float64{0, 3}, []int{1100, 1200}},
			{"m.jsonl:5", []float64{0}, []float64{0}, []int{700}},
		}},
		// A session_id groups lines whatever their ids; a shorter prompt does
		// not continue a chain, so without the key these would be two traces.
		{"session ids", `{"timestamp": 10, "input_length": 900, "output_length": 1, "hash_ids": [0, 1, 2], "session_id": "s1"}
{"timestamp": 20, "input_length": 600, "output_length": 1, "hash_ids": [5, 6], "session_id": 7}
{"timestamp": 1010, "input_length": 300, "output_length": 1, "hash_ids": [9], "session_id": "s1"}
`, []conv{
			{"m.jsonl:1", []float64{0, 1}, []float64{0, 1}, []int{900, 300}},
			{"m.jsonl:2", []float64{0}, []float64{0}, []int{600}},
		}},
		// A later prompt that does not keep all of the previous full blocks
		// starts its own conversation.
		{"broken prefix", `{"timestamp": 0, "input_length": 1800, "output_length": 1, "hash_ids": [0, 1, 2, 3]}
{"timestamp": 5, "input_length": 1900, "output_length": 1, "hash_ids": [0, 1, 9, 3]}
`, []conv{
			{"m.jsonl:1", []float64{0}, []float64{0}, []int{1800}},
			{"m.jsonl:2", []float64{0}, []float64{0}, []int{1900}},
		}},
	}
	for _, c := range cases {
		got, err := Read(strings.NewReader(c.input), "some/dir/m.jsonl")
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: %d traces, want %d", c.name, len(got), len(c.want))
			continue
		}
		for i, w := range c.want {
			tr := got[i]
			var starts, thinks []float64
			var ins []int
			for _, r := range tr.Requests {
				starts, thinks, ins = append(starts, r.T), append(thinks, r.ThinkTime), append(ins, r.In)
			}
			if tr.ID != w.id || tr.BlockSize != MooncakeBlockSize || !slices.Equal(starts, w.starts) || !slices.Equal(thinks, w.thinks) || !slices.Equal(ins, w.ins) {
				t.Errorf("%s: trace %d = %s block %d t %v think %v in %v, want %s block 512 t %v think %v in %v",
					c.name, i, tr.ID, tr.BlockSize, starts, thinks, ins, w.id, w.starts, w.thinks, w.ins)
			}
			for _, turn := range tr.Turns() {
				if turn.BlockSize != MooncakeBlockSize {
					t.Errorf("%s: a turn of %s has block size %d, want 512", c.name, tr.ID, turn.BlockSize)
				}
			}
		}
	}
}

func TestReadMooncakeErrors(t *testing.T) {
	ok := `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}` + "\n"
	cases := []struct {
		name, input, want string
	}{
		// Each required field is named when missing, with file and line.
		{"no timestamp", ok + `{"input_length": 10, "output_length": 1, "hash_ids": [0]}`, "m.jsonl:2: timestamp: missing"},
		{"no output", ok + `{"timestamp": 1, "input_length": 10, "hash_ids": [0]}`, "m.jsonl:2: output_length: missing"},
		{"no hash ids", ok + `{"timestamp": 1, "input_length": 10, "output_length": 1}`, "m.jsonl:2: hash_ids: missing"},
		// Wrong types and values name the field.
		{"string length", ok + `{"timestamp": 1, "input_length": "10", "output_length": 1, "hash_ids": [0]}`, "m.jsonl:2: input_length: is a JSON string, want an integer"},
		{"string id", ok + `{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": ["a"]}`, "m.jsonl:2: hash_ids: is a JSON string"},
		{"negative output", ok + `{"timestamp": 1, "input_length": 10, "output_length": -1, "hash_ids": [0]}`, "m.jsonl:2: output_length: must be >= 0"},
		{"negative timestamp", `{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": [0]}`, "m.jsonl:1: timestamp: must be >= 0"},
		{"object session", ok + `{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [0], "session_id": {}}`, "m.jsonl:2: session_id: must be a string or a number"},
		// A session's requests must come in arrival order.
		{"session out of order", `{"timestamp": 9, "input_length": 10, "output_length": 1, "hash_ids": [0], "session_id": 1}
{"timestamp": 3, "input_length": 10, "output_length": 1, "hash_ids": [0], "session_id": 1}`, "m.jsonl:2: timestamp: 3 is before"},
		// Broken JSON and stray values name the line.
		{"broken line", ok + `{"timestamp": 1,`, "m.jsonl:2: not valid JSON"},
		{"not an object", ok + `[1]`, "m.jsonl:2: a Mooncake line must hold one JSON request object"},
	}
	for _, c := range cases {
		_, err := Read(strings.NewReader(c.input), "m.jsonl")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestReadPathMooncakeFolder(t *testing.T) {
	// Mooncake and Weka files can sit in one folder; ids stay unique.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(moon), 0o644)
	os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(moon), 0o644)
	os.WriteFile(filepath.Join(dir, "c.json"), []byte(tiny), 0o644)
	got, err := ReadPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3+3+1 {
		t.Errorf("read %d traces, want 7", len(got))
	}
}
