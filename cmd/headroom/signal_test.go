package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
)

// TestMain lets a test run this test binary as the headroom command itself.
func TestMain(m *testing.M) {
	if os.Getenv("HEADROOM_TEST_MAIN") == "1" {
		args := strings.Fields(os.Getenv("HEADROOM_TEST_ARGS"))
		if len(os.Args) > 1 && os.Args[1] == "shard" {
			args = os.Args[1:] // a shard a sharded run started (rig.ExecShard)
		}
		os.Args = append([]string{"headroom"}, args...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// processScale is the wall clock of the run file the tests that signal or
// kill a real headroom process use: a step of 60 s of warm-up and 180 s
// judged lasts 6 s of wall time, long enough to be interrupted inside it
// with a margin for a loaded host, short enough to keep the tests quick.
// (processScale itself is in race_on_test.go / race_off_test.go)

// processRunFile writes, in dir, the run file the tests that signal or kill
// a real headroom process use: the default cut to a 2, 4 ladder of
// 3-minute steps on a clock processScale times faster than modelled time,
// without mini evals.
func processRunFile(t *testing.T, dir string) string {
	t.Helper()
	changes := []string{
		"ladder: [4, 8, 12, 16, 20]", "ladder: [2, 4]",
		"target: 8", "target: 4",
		"stress: 12", "stress: 4",
		"step_s: 900", "step_s: 180",
		"time_scale: 100", "time_scale: " + strconv.Itoa(processScale),
		"synth_sessions: 200", "synth_sessions: 40",
		// no mini evals: at this scale they take 4 s of each run
		"suites: [tool_calling, long_context_readback]", "suites: []",
		"under_load_share: 0.05", "under_load_share: 0",
	}
	def := string(config.DefaultYAML())
	for i := 0; i < len(changes); i += 2 {
		if !strings.Contains(def, changes[i]) {
			t.Fatalf("the default run file no longer holds %q: update processRunFile", changes[i])
		}
	}
	cfg := strings.NewReplacer(changes...).Replace(def)
	f := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// processDeadline bounds a signalled or killed headroom process: far past
// what the run takes on an idle host (seconds), it only stops a hang.
const processDeadline = 5 * time.Minute

// modelledWall is the wall time d of modelled time takes at processScale.
func modelledWall(d time.Duration) time.Duration { return d / processScale }

// TestInterruptMidStep sends SIGINT to a real headroom process in the middle
// of a step: it must cancel the load, run post-flight, write the partial
// report and exit with the code of what it measured.
func TestInterruptMidStep(t *testing.T) {
	if testing.Short() {
		t.Skip("signal test skipped in -short mode")
	}
	t.Parallel() // a wall-clock process that mostly waits
	dir := t.TempDir()
	f := processRunFile(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HEADROOM_TEST_MAIN=1", "HEADROOM_TEST_ARGS=run -f "+f+" --output "+filepath.Join(dir, "runs")+" --json")
	stderr, _ := cmd.StderrPipe()
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// wait until the second step is under way, then interrupt
	sc := bufio.NewScanner(stderr)
	// only bounds a hang: a loaded host (load 20, -race) may take minutes
	deadline := time.AfterFunc(processDeadline, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	var log strings.Builder
	sent := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if !sent && strings.Contains(sc.Text(), "step 2: 4 sessions, warm-up") {
			time.Sleep(modelledWall(120 * time.Second)) // 60 s into the step's judged time
			cmd.Process.Signal(syscall.SIGINT)
			sent = true
		}
	}
	err := cmd.Wait()
	if !sent {
		t.Fatalf("the run never reached step 2:\n%s", log.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 0 && code != 2 && code != 3 {
		t.Errorf("exit code %d after SIGINT, want the code of what was measured (0, 2 or 3)\n%s", code, log.String())
	}
	if !strings.Contains(log.String(), "interrupted") {
		t.Errorf("no interruption was reported:\n%s", log.String())
	}
	var sum report.Summary
	if err := json.Unmarshal([]byte(stdout.String()), &sum); err != nil {
		t.Fatalf("no summary after SIGINT: %v\n%s", err, stdout.String())
	}
	if len(sum.Steps) != 1 || !strings.HasPrefix(sum.StopReason, "interrupted") {
		t.Errorf("steps %d, stop reason %q: want the one finished step and the interruption", len(sum.Steps), sum.StopReason)
	}
	if !sum.PostFlight.Idle {
		t.Errorf("post-flight after SIGINT: %+v", sum.PostFlight)
	}
	for _, name := range []string{"summary.json", "report.html", "records.jsonl", "steps.jsonl"} {
		if _, err := os.Stat(filepath.Join(sum.RunDir, name)); err != nil {
			t.Errorf("partial run directory lacks %s", name)
		}
	}
}
