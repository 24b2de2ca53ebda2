package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/report"
)

// TestSmokeRunsOneShortStep: smoke is pre-flight, evals and the first step
// only, judged for --step-s, that step the target.
func TestSmokeRunsOneShortStep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs one short step against the simulator")
	}
	var out, errOut bytes.Buffer
	args := []string{"smoke", "--json", "--step-s", "90", "--set", "sweep.window_s=30", "--set", "workload.synth_sessions=40",
		"--set", "evals.suites=[tool_calling]", "--set", "output=" + t.TempDir(), "--set", "time_scale=virtual"}
	err := run(context.Background(), args, &out, &errOut)
	var ee exitError
	if err != nil && !(errors.As(err, &ee) && ee.code == 3) {
		t.Fatalf("smoke: %v\n%s", err, errOut.String())
	}
	var sum report.Summary
	if jerr := json.Unmarshal(out.Bytes(), &sum); jerr != nil {
		t.Fatalf("smoke --json: %v\n%s", jerr, out.String())
	}
	if !strings.Contains(errOut.String(), "time scale virtual") {
		t.Errorf("smoke did not run on the virtual clock:\n%s", errOut.String())
	}
	if len(sum.Steps) != 1 || sum.Steps[0].Sessions != 4 || sum.Target == nil {
		t.Errorf("smoke ran %d steps (want the first step, 4 sessions, as the target): %+v", len(sum.Steps), sum.Steps)
	}
	if w := sum.Steps[0].EndS - sum.Steps[0].MeasureStartS; w < 89 || w > 130 {
		t.Errorf("the step was judged for %.0f s, want about 90", w)
	}
	evals := false
	for _, p := range sum.Phases {
		evals = evals || (p.Name == "mini evals" && p.Status == "ok")
	}
	if !evals {
		t.Errorf("smoke skipped the mini evals: %+v", sum.Phases)
	}
}

// TestRehearseHelpListsEveryFault: the manual names each fault and verdict.
func TestRehearseHelpListsEveryFault(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"rehearse", "--help"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"crashed engine mid-step", "never pass", "SIGINT mid-step", "Examples:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rehearse --help lacks %q", want)
		}
	}
}
