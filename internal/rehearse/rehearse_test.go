package rehearse

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// TestShortRehearsal is the short form of `headroom rehearse`: the clean
// run and one fault of each kind (the step never passes, pre-flight stops
// on missing metrics and on the wrong model) give what they must.
func TestShortRehearsal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four short sweeps against the simulator")
	}
	base := Base(config.Default(), t.TempDir())
	base.Workload.SynthSessions = 40
	if !base.TimeScale.Virtual() {
		t.Fatalf("the rehearsal runs at time scale %s, want the virtual clock", base.TimeScale)
	}
	var progress bytes.Buffer
	rows, err := Run(context.Background(), base, Options{Short: true, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(shortList) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(shortList), progress.String())
	}
	var table bytes.Buffer
	if err := WriteTable(&table, rows); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table.String())
	for _, r := range rows {
		if !r.OK {
			t.Errorf("%s: expected %s, got %s", r.Fault, r.Expected, r.Got)
		}
	}
	if Failed(rows) != strings.Contains(table.String(), "WRONG") {
		t.Error("Failed and the table disagree")
	}
}

// TestInterruptOnTheScaledClock: the SIGINT rehearsal is interrupted a
// wall-clock moment into its step, so it alone runs on the scaled clock
// (the virtual one could finish the step first); it is interrupted and
// rolls back.
func TestInterruptOnTheScaledClock(t *testing.T) {
	dir := t.TempDir()
	base := Base(config.Default(), dir)
	base.Workload.SynthSessions = 40
	rows, err := Run(context.Background(), base, Options{Only: "SIGINT"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !rows[0].OK {
		t.Fatalf("rows %+v, want the SIGINT rehearsal, ok", rows)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*", "config.yaml"))
	if len(files) != 1 {
		t.Fatalf("run directories' config.yaml: %v, want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil || !strings.Contains(string(b), fmt.Sprintf("time_scale: %g\n", float64(interruptScale))) {
		t.Errorf("the interrupted rehearsal's config.yaml (%v) does not read time_scale: %g:\n%s", err, float64(interruptScale), b)
	}
}

// TestChecksCatchAWrongPass: a check must fail when the verdict it guards
// against comes out, or the rehearsal proves nothing.
func TestChecksCatchAWrongPass(t *testing.T) {
	base := Base(config.Default(), t.TempDir())
	pass := Outcome{}
	pass.Summary.Steps = append(pass.Summary.Steps, stepWith("pass"))
	guards := map[string]bool{"crashed engine mid-step": false, "stall": false, "KV cache full mid-step": false,
		"refused long prompts": false, "metrics gone": false, "malformed tool calls under load": false}
	for _, sc := range Scenarios(base) {
		if _, ok := guards[sc.Name]; !ok {
			continue
		}
		guards[sc.Name] = true
		if _, ok := sc.Check(pass); ok {
			t.Errorf("%s: a passing step was accepted", sc.Name)
		}
	}
	for name, seen := range guards {
		if !seen {
			t.Errorf("no scenario is named %q: its check went untested", name)
		}
	}
}

func stepWith(v string) report.Step {
	return report.Step{Sessions: 4, Verdict: verdict.Verdict(v)}
}
