package rig

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// llmdBuild is the build script of llm-d-inference-sim, an independent vLLM
// simulator by the llm-d project, shared beside the project's checkouts.
var llmdBuild = filepath.Join("..", "..", "..", "shared", "servers", "llm-d-inference-sim", "build.sh")

// llmdBinary builds llm-d-inference-sim into a temporary folder from the
// shared source, with the module proxy off: the modules must already be in
// the module cache (.ci/run builds it once before the tests), and the Go
// build cache makes the build take seconds. It skips when the source or the
// modules are absent, unless HEADROOM_REQUIRE_SHARED=1.
func llmdBinary(t *testing.T) string {
	t.Helper()
	absent := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("HEADROOM_REQUIRE_SHARED") == "1" {
			t.Fatalf("%s, and HEADROOM_REQUIRE_SHARED=1", msg)
		}
		t.Skipf("%s; set HEADROOM_REQUIRE_SHARED=1 to make this a failure", msg)
	}
	if _, err := os.Stat(llmdBuild); err != nil {
		absent("llm-d-inference-sim's source is absent (%v)", err)
	}
	bin := filepath.Join(t.TempDir(), "llm-d-inference-sim")
	cmd := exec.Command("bash", llmdBuild, bin)
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod",
		"LLMD_SRC_DIR="+filepath.Join(os.TempDir(), "headroom-test-llm-d-inference-sim-src"))
	if out, err := cmd.CombinedOutput(); err != nil {
		absent("llm-d-inference-sim did not build offline (run %s once with the module proxy reachable): %v\n%s", llmdBuild, err, out)
	}
	return bin
}

// startLLMD starts llm-d-inference-sim on a free loopback port with args and
// waits until it lists its model; it is stopped when the test ends.
func startLLMD(t *testing.T, bin, model string, args ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, append([]string{"--model", model, "--port", fmt.Sprint(port)}, args...)...)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	// a child process on the wall clock: a wide margin for a busy host
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := http.Get(url + "/v1/models")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("llm-d-inference-sim did not come up on %s: %v\n%s", url, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLLMDShortStepPasses: against a freshly started llm-d-inference-sim
// (no HTTP status counters, latency histograms only after its first answer),
// a flags-only run passes pre-flight with no bar.client_errors, priming
// the server and counting errors as the client sees them, and its short step
// runs until its errors are decided and passes. Before, pre-flight stopped
// ("the bar needs signals the server does not report"), and a step this
// short read too close on errors alone.
func TestLLMDShortStepPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real server for about a minute")
	}
	bin := llmdBinary(t)
	model := "glm-5.3"
	url := startLLMD(t, bin, model, "--max-num-seqs", "16", "--time-to-first-token", "50ms", "--inter-token-latency", "1ms",
		"--max-model-len", "1048576", "--force-dummy-tokenizer", "--max-request-body-size-mb", "64", "--seed", "1")
	var ovs []config.Override
	for _, kv := range [][2]string{
		// what --endpoint and --model set
		{"recipe.endpoint", url}, {"time_scale", "1"}, {"recipe.sim", "null"},
		{"recipe.metrics", "[]"}, {"recipe.metrics[0]", url + "/metrics"}, {"recipe.model", model},
		// one short step; no eval suites (the simulator answers tool calls
		// with random text); no think time, so the step has turns enough.
		// Unloaded the step is decided in its first 30 s (about 240
		// turns); it may extend to 240 s, since at load 20 a starved
		// client sent 55 turns in 30 s and read too close with no room
		// to extend (max_step_s was 60). The warm-up is 40 s: at load 20
		// three of the 8 lanes' priming requests outlasted a 10 s warm-up
		// (2026-12-07), and a lane that joins the judged time cold ends
		// the run (sweep.ErrWarmupTooShort)
		{"sweep.ladder", "[8]"}, {"sweep.target", "8"}, {"sweep.stress", "null"}, {"sweep.repeat", "false"},
		{"sweep.warmup_s", "40"}, {"workload.prime_timeout_s", "40"}, {"sweep.step_s", "30"}, {"sweep.max_step_s", "240"}, {"sweep.window_s", "10"}, {"sweep.drain_s", "30"},
		{"evals.suites", "[]"}, {"evals.under_load_share", "0"}, {"workload.think_time", "none"},
		{"output", t.TempDir()},
	} {
		ovs = append(ovs, config.Override{Path: kv[0], Value: kv[1], Flag: "--set"})
	}
	cfg, err := config.DefaultWith(ovs...)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bar.ClientErrors {
		t.Fatal("test setup: bar.client_errors is on before pre-flight")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // bounds a hang only
	defer cancel()
	var progress strings.Builder
	sum, err := Run(ctx, Options{Config: cfg, Progress: &progress})
	if len(sum.Phases) == 0 || sum.Phases[0].Name != PhasePreflight || sum.Phases[0].Status != "ok" {
		t.Fatalf("pre-flight did not pass: phases %+v, err %v\n%s", sum.Phases, err, progress.String())
	}
	pre := sum.Phases[0].Detail
	for _, want := range []string{"one priming request was sent", "counted as the client sees them"} {
		if !strings.Contains(pre, want) {
			t.Errorf("pre-flight detail lacks %q: %s", want, pre)
		}
	}
	if !strings.Contains(strings.Join(sum.Warnings, "\n"), "pre-flight turned bar.client_errors on") {
		t.Errorf("the report's warnings do not say errors are the client's count: %q", sum.Warnings)
	}
	for _, line := range strings.Split(progress.String(), "\n") {
		if strings.HasPrefix(line, "step ") {
			t.Log(line)
		}
	}
	passed := false
	for _, st := range sum.Steps {
		passed = passed || st.Verdict == verdict.Pass
	}
	if !passed {
		t.Errorf("no step passed: %+v (err %v)\n%s", sum.Steps, err, progress.String())
	}
}
