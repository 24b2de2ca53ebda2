package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
)

// TestFourShardsMatchOneProcess runs the same wall-clock run file once in
// one process and once over four: this process the coordinator, three
// real headroom processes (`headroom shard`) its shards on loopback. The
// shards' lanes are lane ids i with i mod 4 = K, each in its own records
// file; both runs send about the same turns at each step (within a
// Poisson spread), no step passes on one and fails on the other, and
// judge, reading the sharded run directory back, counts the turns the
// live run did.
func TestFourShardsMatchOneProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real headroom processes on a wall clock")
	}
	dir := t.TempDir()
	f := processRunFile(t, dir)
	args := []string{"run", "-f", f, "--sessions", "4,8", "--set", "sweep.repeat=false", "--json"}
	one := runSummary(t, append(args, "--output", filepath.Join(dir, "one"))...)
	t.Setenv("HEADROOM_TEST_MAIN", "1") // the shards this run starts are this binary as headroom
	four := runSummary(t, append(args, "--output", filepath.Join(dir, "four"), "--shards", "4")...)
	// the ladder's 2 steps, and, where neither passed, the same steps below
	// the lowest (docs/sweep.md: "Nothing held at all")
	if len(one.Steps) < 2 || len(four.Steps) != len(one.Steps) {
		t.Fatalf("steps: one process %d, four shards %d, want 2 or more, the same in each", len(one.Steps), len(four.Steps))
	}
	for i := range one.Steps {
		a, b := one.Steps[i], four.Steps[i]
		t.Logf("%d sessions: one process %s, %d turns; four shards %s, %d turns", a.Sessions, a.Verdict, a.Load.Sent, b.Verdict, b.Load.Sent)
		if spread := 4*math.Sqrt(float64(a.Load.Sent+b.Load.Sent)/2) + 5; math.Abs(float64(a.Load.Sent-b.Load.Sent)) > spread {
			t.Errorf("%d sessions: %d turns in one process, %d over four shards (more apart than %.0f)", a.Sessions, a.Load.Sent, b.Load.Sent, spread)
		}
		if (a.Verdict == "pass" && b.Verdict == "fail") || (a.Verdict == "fail" && b.Verdict == "pass") {
			t.Errorf("%d sessions: %s in one process, %s over four shards", a.Sessions, a.Verdict, b.Verdict)
		}
	}
	d, err := report.OpenDir(four.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	files := d.RecordFiles()
	if len(files) != 4 {
		t.Fatalf("record files %v, want records.jsonl and three shards'", files)
	}
	for k, name := range files {
		b, err := os.ReadFile(d.File(name))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var r load.Record
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if r.Lane%4 != k || r.Shard != k {
				t.Errorf("%s holds lane %d of shard %d", name, r.Lane, r.Shard)
				break
			}
			n++
		}
		if n == 0 {
			t.Errorf("%s is empty", name)
		}
	}
	judged := runSummary(t, "judge", four.RunDir, "--json")
	for i, s := range judged.Steps {
		if s.Load.Sent != four.Steps[i].Load.Sent {
			t.Errorf("judge counts %d turns at %d sessions, the live run %d", s.Load.Sent, s.Sessions, four.Steps[i].Load.Sent)
		}
	}
}
