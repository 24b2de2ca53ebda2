package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
		os.Args = append([]string{"headroom"}, strings.Fields(os.Getenv("HEADROOM_TEST_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// processRunFile writes, in dir, the run file the tests that signal or kill
// a real headroom process use: the default cut to a 2, 4, 6 ladder of
// 3-minute steps on a clock 20 times faster than modelled time, so a step
// lasts long enough in wall time to be interrupted inside it.
func processRunFile(t *testing.T, dir string) string {
	t.Helper()
	cfg := strings.NewReplacer(
		"ladder: [4, 8, 12, 16, 20]", "ladder: [2, 4, 6]",
		"target: 8", "target: 6",
		"stress: 12", "stress: 6",
		"step_s: 900", "step_s: 180",
		"time_scale: 100", "time_scale: 20",
		"synth_sessions: 200", "synth_sessions: 40",
	).Replace(string(config.DefaultYAML()))
	f := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestInterruptMidStep sends SIGINT to a real headroom process in the middle
// of a step: it must cancel the load, run post-flight, write the partial
// report and exit with the code of what it measured.
func TestInterruptMidStep(t *testing.T) {
	if testing.Short() {
		t.Skip("signal test skipped in -short mode")
	}
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
	deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	var log strings.Builder
	sent := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if !sent && strings.Contains(sc.Text(), "step 2: 4 sessions, warm-up") {
			time.Sleep(2 * time.Second) // into the step's judged time
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
