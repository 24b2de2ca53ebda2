package rehearse

import (
	"bytes"
	"context"
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
	// priming room for a loaded or -race host (the warm-up row sets its own)
	base.Sweep.WarmupS, base.Workload.PrimeTimeoutS = 240, 240
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

// TestChecksCatchAWrongPass: a check must fail when the verdict it guards
// against comes out, or the rehearsal proves nothing.
func TestChecksCatchAWrongPass(t *testing.T) {
	base := Base(config.Default(), t.TempDir())
	pass := Outcome{}
	pass.Summary.Steps = append(pass.Summary.Steps, stepWith("pass"))
	for _, sc := range Scenarios(base) {
		switch sc.Name {
		case "crashed engine mid-step", "stall", "KV cache full", "refused long prompts", "metrics gone", "malformed tool calls under load":
			if _, ok := sc.Check(pass); ok {
				t.Errorf("%s: a passing step was accepted", sc.Name)
			}
		}
	}
}

func stepWith(v string) report.Step {
	return report.Step{Sessions: 4, Verdict: verdict.Verdict(v)}
}
