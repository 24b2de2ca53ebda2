package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
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
// nobody gave (1 GPU, not priced), takes --gpus, --usd-per-gpu-hour,
// --sessions, --target and --step, and its plan fits its own GPU window.
func TestFlagsOnlyRunStatesOnlyWhatFlagsGive(t *testing.T) {
	cfg := printedConfig(t, "run", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m")
	rc := cfg.Recipe
	if rc.Name != "127.0.0.1-9" || rc.Nodes != 1 || rc.GPUsPerNode != 1 || rc.USDPerGPUHour != 0 {
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
