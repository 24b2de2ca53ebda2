package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// TestKillAndResumeCountsNothingTwice kills a real headroom process with
// SIGKILL during its second step, resumes it and re-judges it. The resume
// cuts off the torn lines a kill mid-write leaves and drops the killed
// step's records and scrapes (the test adds a line of each, as a flushed
// buffer would have held), so the killed step runs again whole: the step
// before the kill is kept as it was, nothing is counted twice, and judge
// gives the resumed run's verdicts and turn counts. The same file
// simulated unkilled (same seed, on the virtual clock) climbs the same
// ladder; its verdicts may differ from the resumed run's only within their
// intervals.
func TestKillAndResumeCountsNothingTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test skipped in -short mode")
	}
	t.Parallel() // a wall-clock process that mostly waits
	dir := t.TempDir()
	f := processRunFile(t, dir)
	unkilled := runSummary(t, "simulate", "-f", f, "--output", filepath.Join(dir, "a"), "--json")

	// the same file on its wall clock, killed 30 modelled seconds into
	// step 2's judged time (150 modelled seconds of the step left: 3.75 s
	// of wall time at x40 for a loaded host to be late by)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HEADROOM_TEST_MAIN=1", "HEADROOM_TEST_ARGS=run -f "+f+" --output "+filepath.Join(dir, "b"))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.AfterFunc(processDeadline, func() { cmd.Process.Kill() }) // only bounds a hang
	defer deadline.Stop()
	sc := bufio.NewScanner(stderr)
	var log strings.Builder
	killed := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if !killed && strings.Contains(sc.Text(), "step 2: 4 sessions, warm-up") {
			time.Sleep(modelledWall(90 * time.Second)) // 60 s of warm-up and 30 s of judged time
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	cmd.Wait()
	if !killed {
		t.Fatalf("the run never reached step 2:\n%s", log.String())
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "b", "*", "*"))
	if len(runs) != 1 {
		t.Fatalf("run directories %v, want one", runs)
	}
	runDir := runs[0]
	before := readSteps(t, runDir)
	if len(before) != 1 {
		t.Fatalf("the killed run kept %d finished steps, want 1", len(before))
	}
	// what a kill mid-write leaves on top: a whole line of the killed step
	// in each file (a buffer flushed before the kill), then a torn line
	lastEnd := before[0].End
	addKilledLines(t, filepath.Join(runDir, "records.jsonl"), func(m map[string]any) {
		m["step"], m["session"], m["send_s"] = 1, "killed-step-marker", lastEnd+150
	}, `{"v":1,"step":1,"phase":"mea`)
	addKilledLines(t, filepath.Join(runDir, "metrics.jsonl"), func(m map[string]any) {
		m["at"] = int64((lastEnd + 150) * 1e9)
		m["counter"] = map[string]any{"killed_step_marker": 1}
	}, `{"at":`)

	resumed := runSummary(t, "run", "--json", "--resume", runDir)
	judged := runSummary(t, "judge", "--json", runDir)

	warnings := strings.Join(resumed.Warnings, "\n")
	for _, want := range []string{"records.jsonl: cut a torn last line", "metrics.jsonl: cut a torn last line", "of step 2, which the kill interrupted: it runs again whole"} {
		if !strings.Contains(warnings, want) {
			t.Errorf("the resumed run does not warn %q:\n%s", want, warnings)
		}
	}
	for _, name := range []string{"records.jsonl", "metrics.jsonl"} {
		b, _ := os.ReadFile(filepath.Join(runDir, name))
		if strings.Contains(string(b), "killed-step-marker") || strings.Contains(string(b), "killed_step_marker") {
			t.Errorf("%s still holds the killed step's line", name)
		}
	}
	recs, err := load.ReadRecords(filepath.Join(runDir, "records.jsonl"))
	if err != nil {
		t.Fatalf("records.jsonl after the resume: %v", err)
	}
	if len(resumed.Steps) < 2 || resumed.Steps[0].Sessions != 2 || resumed.Steps[1].Sessions != 4 {
		t.Fatalf("resumed steps %v, want the ladder from 2 and the killed step of 4 again", sessionsOf(resumed.Steps))
	}
	for _, r := range recs {
		if r.Step == 1 && r.Send < resumed.Steps[1].StartS {
			t.Errorf("a record of the killed step's first attempt survived: %+v", r)
			break
		}
	}
	// the step before the kill is kept as it was judged
	first := report.StepOf(before[0])
	sameJSON(t, "the step before the kill", []any{first.Verdict, first.Load, first.Parts}, []any{resumed.Steps[0].Verdict, resumed.Steps[0].Load, resumed.Steps[0].Parts})
	// judge agrees with the resumed run on every step
	if len(judged.Steps) != len(resumed.Steps) {
		t.Fatalf("judge found %d steps, the resumed run %d", len(judged.Steps), len(resumed.Steps))
	}
	for i := range resumed.Steps {
		sameJSON(t, fmt.Sprintf("step %d re-judged", i+1), resumed.Steps[i], judged.Steps[i])
	}
	sameJSON(t, "capacity re-judged", resumed.Capacity, judged.Capacity)
	sameJSON(t, "target re-judged", resumed.Target, judged.Target)

	// against the run never killed (on the virtual clock): the same
	// ladder. Its latencies and verdicts are not compared: the killed run's
	// are measured on the wall clock, and read how busy the host was.
	for i := 0; i < min(len(unkilled.Steps), len(resumed.Steps)); i++ {
		a, b := unkilled.Steps[i], resumed.Steps[i]
		t.Logf("step %d, %d sessions: unkilled %d turns %s, killed and resumed %d turns %s", i+1, a.Sessions, a.Load.Planned, a.Verdict, b.Load.Planned, b.Verdict)
		if a.Sessions != b.Sessions {
			t.Errorf("step %d: %d sessions unkilled, %d resumed", i+1, a.Sessions, b.Sessions)
		}
	}
}

// runSummary runs headroom in this process and reads the summary it prints;
// only the exit codes of a verdict (0, 2, 3) are accepted.
func runSummary(t *testing.T, args ...string) report.Summary {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	var ee exitError
	if err != nil && !(errors.As(err, &ee) && (ee.code == 2 || ee.code == 3)) {
		t.Fatalf("headroom %v: %v\n%s", args, err, errOut.String())
	}
	var sum report.Summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("headroom %v printed no summary: %v\n%s", args, err, out.String())
	}
	return sum
}

func readSteps(t *testing.T, runDir string) []sweep.StepResult {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []sweep.StepResult
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var s sweep.StepResult
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("steps.jsonl: %v", err)
		}
		out = append(out, s)
	}
	return out
}

// addKilledLines appends to a run file a copy of its last line changed by
// change, then a torn line.
func addKilledLines(t *testing.T, path string, change func(map[string]any), torn string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	line, _ := json.Marshal(m)
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	fh.Write(append(line, '\n'))
	fh.WriteString(torn)
}

// sameJSON fails the test when a and b do not encode alike.
func sameJSON(t *testing.T, what string, a, b any) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("%s differs:\n  %s\n  %s", what, ja, jb)
	}
}

// TestJSONSummaryOnRigError: a run that ends in a rig error (here an
// endpoint nothing listens on) exits 1 and still prints its summary with
// --json, carrying the error, with no capacity and no target verdict.
func TestJSONSummaryOnRigError(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"run", "--json", "--output", t.TempDir(), "--endpoint", "http://127.0.0.1:1", "--model", "m",
		"--set", "sweep.ready_timeout_s=0.5"}, &out, &errOut)
	var ee exitError
	if err == nil || errors.As(err, &ee) {
		t.Fatalf("err = %v, want a rig error (exit 1)", err)
	}
	var raw map[string]any
	if jerr := json.Unmarshal(out.Bytes(), &raw); jerr != nil {
		t.Fatalf("--json printed no summary after a rig error: %v\n%s", jerr, out.String())
	}
	if e, _ := raw["error"].(string); !strings.Contains(e, "nothing listens on 127.0.0.1 port 1") {
		t.Errorf("the summary's error is %q, want why the run stopped", raw["error"])
	}
	if raw["capacity"] != nil || raw["target"] != nil {
		t.Errorf("capacity %v, target %v after a failed pre-flight, want none", raw["capacity"], raw["target"])
	}
}
