package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/report"
)

// TestDefaultRunIsVirtual: with no run file and no endpoint, run (and plan)
// take the built-in simulator on the virtual clock, and say so; the
// wall-clock rehearsal is one flag away, and a run file keeps its own clock.
func TestDefaultRunIsVirtual(t *testing.T) {
	if cfg := printedConfig(t, "run"); !cfg.TimeScale.Virtual() {
		t.Errorf("default run: time_scale %v, want virtual", cfg.TimeScale)
	}
	if cfg := printedConfig(t, "run", "--endpoint", "sim"); !cfg.TimeScale.Virtual() {
		t.Errorf("--endpoint sim: time_scale %v, want virtual", cfg.TimeScale)
	}
	if cfg := printedConfig(t, "run", "--time-scale", "100"); cfg.TimeScale != 100 {
		t.Errorf("--time-scale 100: time_scale %v", cfg.TimeScale)
	}
	if cfg := printedConfig(t, "run", "--set", "time_scale=50"); cfg.TimeScale != 50 {
		t.Errorf("--set time_scale=50: time_scale %v", cfg.TimeScale)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"plan"}, &out, &out); err != nil {
		t.Fatalf("default plan: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "the built-in simulator on the virtual clock") {
		t.Errorf("the default plan does not say it runs on the virtual clock:\n%s", out.String())
	}
}

// TestFlagsOnlyRunStatesOnlyWhatFlagsGive: a run from flags alone against a
// real endpoint is named after the server, states no hardware or price
// nobody gave (GPUs not stated, not priced), takes --gpus, --usd-per-gpu-hour,
// --sessions, --target and --step, and its plan fits its own GPU window.
func TestFlagsOnlyRunStatesOnlyWhatFlagsGive(t *testing.T) {
	cfg := printedConfig(t, "run", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m")
	rc := cfg.Recipe
	if rc.Name != "127.0.0.1-9" || rc.Nodes != 0 || rc.GPUsPerNode != 0 || rc.USDPerGPUHour != 0 {
		t.Errorf("flags-only recipe: name %q, %d x %d GPUs at $%g", rc.Name, rc.Nodes, rc.GPUsPerNode, rc.USDPerGPUHour)
	}
	cfg = printedConfig(t, "run", "--endpoint", "http://gw.example.com:8000", "--model", "m",
		"--gpus", "4", "--usd-per-gpu-hour", "2.5", "--sessions", "2,4,6", "--target", "4", "--step", "5m")
	rc, sw := cfg.Recipe, cfg.Sweep
	if rc.Name != "gw.example.com-8000" || rc.Nodes*rc.GPUsPerNode != 4 || rc.USDPerGPUHour != 2.5 {
		t.Errorf("recipe: name %q, %d x %d GPUs at $%g", rc.Name, rc.Nodes, rc.GPUsPerNode, rc.USDPerGPUHour)
	}
	if !slices.Equal(sw.Ladder, []int{2, 4, 6}) || sw.Target != 4 || sw.Stress != 0 || sw.StepS != 300 {
		t.Errorf("sweep: ladder %v, target %d, stress %d (not on the ladder: dropped), step %gs", sw.Ladder, sw.Target, sw.Stress, sw.StepS)
	}
	// the ladder alone keeps a target it holds and drops one it lacks
	if sw := printedConfig(t, "run", "--sessions", "4,8").Sweep; sw.Target != 8 || sw.Stress != 0 {
		t.Errorf("--sessions 4,8: target %d, stress %d", sw.Target, sw.Stress)
	}
	if sw := printedConfig(t, "run", "--sessions", "3,6").Sweep; sw.Target != 0 {
		t.Errorf("--sessions 3,6: target %d, want none", sw.Target)
	}
	// a file keeps its own recipe name; --gpus and the price still apply
	if rc := printedConfig(t, "run", "-f", "../../examples/run.yaml", "--gpus", "8").Recipe; rc.Name == "127.0.0.1-8000" || rc.GPUsPerNode != 8 || rc.Nodes != 1 {
		t.Errorf("-f with --gpus: name %q, %d x %d GPUs", rc.Name, rc.Nodes, rc.GPUsPerNode)
	}
	for _, bad := range [][]string{{"--sessions", "4,x"}, {"--step", "soon"}, {"--target", "5", "--sessions", "4,8"}} {
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"run", "--print-config"}, bad...), &out, &out); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"plan", "--endpoint", "http://127.0.0.1:9/", "--model", "m"}, &out, &out); err != nil {
		t.Errorf("plan with only flags: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "plan for recipe 127.0.0.1-9") {
		t.Errorf("the plan does not name the recipe after the endpoint:\n%s", out.String())
	}
	for in, want := range map[string]string{"http://user:secret@10.0.0.5:8000/v1": "10.0.0.5-8000", "https://[::1]:443": "1-443", "gw": "gw"} {
		if got := recipeName(in); got != want || strings.ContainsAny(got, `/\ :@`) {
			t.Errorf("recipeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFlagsOnlyRunStatesNoGPUsNobodyGave: a flags-only run against a real
// endpoint given no --gpus states no GPU count anywhere it prints or writes
// (terminal, report.md, report.html, summary.json, the plan) and is not
// priced; with --gpus 8 --usd-per-gpu-hour 2 it states and prices them; a
// price with no GPUs to price is refused, naming both flags. The endpoint is
// a loopback port nothing listens on, so the run stops at pre-flight and
// prints its summary at once.
func TestFlagsOnlyRunStatesNoGPUsNobodyGave(t *testing.T) {
	flagsRun := func(extra ...string) (stdout string, sum report.Summary, dir string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"run", "--output", t.TempDir(), "--endpoint", "http://127.0.0.1:1", "--model", "m",
			"--set", "sweep.ready_timeout_s=0.5"}, extra...)
		err := run(context.Background(), args, &out, &errOut)
		var ee exitError
		if err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), "nothing listens on 127.0.0.1 port 1") {
			t.Fatalf("%v: err = %v, want a failed pre-flight\n%s%s", extra, err, out.String(), errOut.String())
		}
		m := regexp.MustCompile(`run directory: (\S+)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("%v: no run directory printed:\n%s", extra, out.String())
		}
		b, err := os.ReadFile(filepath.Join(m[1], "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &sum); err != nil {
			t.Fatal(err)
		}
		return out.String(), sum, m[1]
	}
	count := regexp.MustCompile(`\d+ x \d+ GPUs|\d+ node\(s\)|× \d+ GPU`)

	out, sum, dir := flagsRun()
	if count.MatchString(out) || !strings.Contains(out, "recipe 127.0.0.1-1: GPUs not stated, not priced; bar:") || !strings.Contains(out, "cost: not priced") {
		t.Errorf("without --gpus the terminal states a GPU count or a price:\n%s", out)
	}
	if r := sum.Recipe; r.Nodes != 0 || r.GPUsPerNode != 0 || r.USDPerGPUHour != 0 || sum.Cost.USDPerHour != 0 {
		t.Errorf("summary.json: %d x %d GPUs at $%g, $%g/hour, want none stated", r.Nodes, r.GPUsPerNode, r.USDPerGPUHour, sum.Cost.USDPerHour)
	}
	for _, name := range []string{"report.md", "report.html"} {
		page, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if c := count.Find(page); c != nil || !strings.Contains(string(page), "GPUs not stated") {
			t.Errorf("%s states %q, want \"GPUs not stated\"", name, c)
		}
	}
	var plan bytes.Buffer
	if err := run(context.Background(), []string{"plan", "--endpoint", "http://127.0.0.1:1", "--model", "m"}, &plan, &plan); err != nil {
		t.Fatalf("plan: %v\n%s", err, plan.String())
	}
	if regexp.MustCompile(`x \d+ GPUs|\d+ GPU-minutes`).MatchString(plan.String()) || !strings.Contains(plan.String(), "GPUs not stated") {
		t.Errorf("without --gpus the plan counts GPUs or GPU-minutes:\n%s", plan.String())
	}

	out, sum, _ = flagsRun("--gpus", "8", "--usd-per-gpu-hour", "2")
	if !strings.Contains(out, "recipe 127.0.0.1-1: 1 x 8 GPUs at $2.00/GPU-hour; bar:") || !strings.Contains(out, "the recipe costs $16.00/hour") {
		t.Errorf("--gpus 8 --usd-per-gpu-hour 2: the terminal does not state and price them:\n%s", out)
	}
	if r := sum.Recipe; r.Nodes*r.GPUsPerNode != 8 || r.USDPerGPUHour != 2 || sum.Cost.USDPerHour != 16 {
		t.Errorf("summary.json: %d x %d GPUs at $%g, $%g/hour", r.Nodes, r.GPUsPerNode, r.USDPerGPUHour, sum.Cost.USDPerHour)
	}

	var errOut bytes.Buffer
	err := run(context.Background(), []string{"run", "--print-config", "--endpoint", "http://127.0.0.1:1", "--model", "m", "--usd-per-gpu-hour", "2"}, &errOut, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--usd-per-gpu-hour") || !strings.Contains(err.Error(), "--gpus") {
		t.Errorf("a price without GPUs: err = %v, want it refused naming --usd-per-gpu-hour and --gpus", err)
	}
}
