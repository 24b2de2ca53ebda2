package config

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultIsValid(t *testing.T) {
	r := Default()
	if r.Recipe.Endpoint != SimEndpoint {
		t.Errorf("default endpoint = %q, want the built-in simulator", r.Recipe.Endpoint)
	}
	if r.Bar.TTFTP90S != 5.3 || r.Bar.InteractivityP90TPS != 10 || r.Bar.ErrorRate != 0.02 {
		t.Errorf("default bar = %+v, want the reference report's 5.3 s / 10 tok/s / 2%%", r.Bar)
	}
}

func TestExamplesAreValid(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples/*.yaml found")
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestValidationNamesTheField(t *testing.T) {
	base := string(defaultYAML)
	cases := []struct {
		name      string
		from, to  string // replace from with to in the default file
		wantField string
	}{
		// A negative TTFT bar cannot be met.
		{"ttft bar", "ttft_p90_s: 5.3", "ttft_p90_s: -1", "bar.ttft_p90_s"},
		// Error rate is a fraction, not a percentage.
		{"error rate as percent", "error_rate: 0.02", "error_rate: 2", "bar.error_rate"},
		// A ladder must go up.
		{"ladder order", "ladder: [4, 8, 12, 16, 20]", "ladder: [4, 2]", "sweep.ladder[1]"},
		// The target must be a step that runs.
		{"target off ladder", "target: 8", "target: 11", "sweep.target"},
		// Windows must tile the scrape grid.
		{"window vs scrape", "window_s: 30", "window_s: 32", "sweep.window_s"},
		// Too short a step cannot be bootstrapped.
		{"short step", "step_s: 900", "step_s: 40", "sweep.step_s"},
		// A step's longest judged time cannot be shorter than its shortest.
		{"max step under step", "step_s: 900", "step_s: 900\n  max_step_s: 600", "sweep.max_step_s"},
		// Unknown think-time mode.
		{"think time", "think_time: capped", "think_time: sometimes", "workload.think_time"},
		// A price is not negative (0: not priced).
		{"price", "usd_per_gpu_hour: 1.80", "usd_per_gpu_hour: -1", "recipe.usd_per_gpu_hour"},
		// A real endpoint needs metrics URLs and an unscaled clock.
		{"real endpoint", "endpoint: sim", "endpoint: http://127.0.0.1:8000", "recipe.metrics"},
		{"real endpoint scale", "endpoint: sim", "endpoint: http://127.0.0.1:8000", "time_scale"},
		// A bad URL.
		{"bad url", "endpoint: sim", "endpoint: localhost:8000", "recipe.endpoint"},
		// Unknown fields are refused, not ignored.
		{"unknown field", "warmup_s: 60", "warmup_s: 60\n  warmup_seconds: 60", "warmup_seconds"},
		// A missing trace file.
		{"missing traces", "traces: synth", "traces: /nonexistent/traces.jsonl", "workload.traces"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.from) {
				t.Fatalf("test setup: %q not in default.yaml", c.from)
			}
			_, err := Parse([]byte(strings.Replace(base, c.from, c.to, 1)), "test.yaml")
			if err == nil {
				t.Fatalf("no error for %s", c.to)
			}
			if !strings.Contains(err.Error(), c.wantField) || !strings.Contains(err.Error(), "test.yaml") {
				t.Errorf("error %q does not name the file and field %s", err, c.wantField)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestSimRouterIsChecked(t *testing.T) {
	r := Default()
	r.Recipe.Copies, r.Recipe.Router = 2, "prefix-aware"
	err := r.Validate()
	if err == nil || !strings.Contains(err.Error(), "recipe.router") {
		t.Fatalf("an unknown simulator router: %v, want a recipe.router error", err)
	}
	r.Recipe.Router = "prefix-affinity"
	if err := r.Validate(); err != nil {
		t.Errorf("prefix-affinity: %v", err)
	}
}

// TestGPUsMayGoUnstatedOnARealEndpoint: a real endpoint may leave both
// nodes and gpus_per_node 0 (GPUs not stated, not priced); the built-in
// simulator, which sizes its engines from them, may not; nor may a recipe
// give one without the other, or a price with no GPUs to price.
func TestGPUsMayGoUnstatedOnARealEndpoint(t *testing.T) {
	real := func(nodes, gpus int, usd float64) Run {
		r := Default()
		r.TimeScale, r.Recipe.Sim = 1, SimSpec{}
		r.Recipe.Endpoint, r.Recipe.Metrics = "http://127.0.0.1:8000", []string{"http://127.0.0.1:8000/metrics"}
		r.Recipe.Nodes, r.Recipe.GPUsPerNode, r.Recipe.USDPerGPUHour = nodes, gpus, usd
		return r
	}
	if err := real(0, 0, 0).Validate(); err != nil {
		t.Errorf("a real endpoint with no GPUs stated: %v", err)
	}
	if err := real(1, 8, 2).Validate(); err != nil {
		t.Errorf("a real endpoint on 1 x 8 GPUs at $2: %v", err)
	}
	sim := Default()
	sim.Recipe.Nodes, sim.Recipe.GPUsPerNode, sim.Recipe.USDPerGPUHour = 0, 0, 0
	for _, c := range []struct {
		name string
		r    Run
		want []string
	}{
		{"simulator", sim, []string{"recipe.nodes: must be at least 1, got 0: the built-in simulator", "recipe.gpus_per_node: must be at least 1"}},
		{"nodes only", real(2, 0, 0), []string{"recipe.gpus_per_node: must be at least 1, got 0: give both, or neither"}},
		{"gpus only", real(0, 8, 0), []string{"recipe.nodes: must be at least 1, got 0: give both, or neither"}},
		{"price, no GPUs", real(0, 0, 2), []string{"recipe.usd_per_gpu_hour: is 2, but the recipe states no GPUs to price"}},
		{"negative", real(-1, -1, 0), []string{"recipe.nodes: must be at least 1, got -1", "recipe.gpus_per_node: must be at least 1, got -1"}},
		{"infinite price", real(1, 8, math.Inf(1)), []string{"recipe.usd_per_gpu_hour: must be >= 0"}},
	} {
		err := c.r.Validate()
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", c.name, err, w)
			}
		}
	}
}
