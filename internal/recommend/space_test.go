package recommend

import (
	"fmt"
	"strings"
	"testing"
)

// A space's file errors and the candidates it expands to, without running
// any of them.
func TestSpaceParse(t *testing.T) {
	cases := []struct {
		name, text string
		wantErr    string // "" when the space loads and expands
		candidates int
		check      func(t *testing.T, cs []Candidate)
	}{
		{
			name: "a path axis crossed with an options axis, first axis slowest",
			text: `version: 1
base: base.yaml
target: 8
axes:
  - path: recipe.usd_per_gpu_hour
    values: [1.5, 2]
  - name: layout
    options:
      - {label: "1x16", set: {recipe.sim.gpus_per_copy: 16}}
      - {label: "2x16", set: {recipe.nodes: 4, recipe.copies: 2, recipe.sim.gpus_per_copy: 16, recipe.router: prefix-affinity}}
`,
			candidates: 4,
			check: func(t *testing.T, cs []Candidate) {
				if cs[1].Label != "usd_per_gpu_hour=1.5 layout=2x16" || cs[2].Label != "usd_per_gpu_hour=2 layout=1x16" {
					t.Errorf("labels %q, %q", cs[1].Label, cs[2].Label)
				}
				c := cs[3].Config
				if c.Recipe.Copies != 2 || c.Recipe.Router != "prefix-affinity" || c.Recipe.USDPerGPUHour != 2 || c.Recipe.Name != "space-4" {
					t.Errorf("candidate 4's recipe %+v", c.Recipe)
				}
				if !c.TimeScale.Virtual() || c.Sweep.Mode != "adaptive" || c.Sweep.Target != 8 {
					t.Errorf("candidate 4 runs at %s in %s mode, target %d; want virtual, adaptive, 8", c.TimeScale, c.Sweep.Mode, c.Sweep.Target)
				}
				if cs[0].GPUs != 16 || cs[0].USDPerHour != 24 {
					t.Errorf("candidate 1: %d GPUs at $%g/hour, want 16 at $24", cs[0].GPUs, cs[0].USDPerHour)
				}
			},
		},
		{
			name: "an inline base; a null value removes a field; constraints skip with the reason",
			text: `version: 1
name: inl
base:
  version: 1
  recipe: {name: x, nodes: 2, gpus_per_node: 8, usd_per_gpu_hour: 2, endpoint: sim, model: m, sim: {profile: default, host_cache: {tib_per_node: 0.8}}}
  bar: {ttft_p90_s: 5, interactivity_p90_tps: 10, error_rate: 0.02}
  sweep: {ladder: [4, 16], step_s: 300, target: 8}
constraints: {max_usd_per_hour: 40}
axes:
  - path: recipe.sim.host_cache
    values: [null, {tib_per_node: 0.4}]
  - path: recipe.usd_per_gpu_hour
    values: [2, 3]
`,
			candidates: 4,
			check: func(t *testing.T, cs []Candidate) {
				if cs[0].Skip != "" || cs[0].Config.Recipe.Sim.HostCache != nil || cs[0].Label != "host_cache=none usd_per_gpu_hour=2" {
					t.Errorf("candidate 1 (%s): skip %q, host cache %+v; want it run with none", cs[0].Label, cs[0].Skip, cs[0].Config.Recipe.Sim.HostCache)
				}
				if h := cs[2].Config.Recipe.Sim.HostCache; h == nil || h.TiBPerNode != 0.4 {
					t.Errorf("candidate 3's host cache %+v, want 0.4 TiB per node", h)
				}
				if !strings.Contains(cs[1].Skip, "$48.00 an hour is over constraints.max_usd_per_hour ($40.00)") {
					t.Errorf("candidate 2 ($3 a GPU-hour): skip %q", cs[1].Skip)
				}
			},
		},
		{
			name: "an invalid combination is kept with the validation message",
			text: `version: 1
base: base.yaml
axes:
  - path: recipe.sim.gpus_per_copy
    values: [16, 5]
`,
			candidates: 2,
			check: func(t *testing.T, cs []Candidate) {
				if cs[0].Skip != "" || !strings.Contains(cs[1].Skip, "recipe.sim.gpus_per_copy") || !strings.Contains(cs[1].Skip, "space.yaml axes[0] recipe.sim.gpus_per_copy") {
					t.Errorf("skips %q and %q; want the second to name the field and the axis that set it", cs[0].Skip, cs[1].Skip)
				}
			},
		},
		{
			name: "an engine the simulator cannot start is skipped with its reason",
			text: `version: 1
base: base.yaml
axes:
  - name: layout
    options:
      - {label: "2x8", set: {recipe.copies: 2, recipe.sim.gpus_per_copy: 8}}
`,
			candidates: 1,
			check: func(t *testing.T, cs []Candidate) {
				if !strings.Contains(cs[0].Skip, "vLLM refuses to start") {
					t.Errorf("vLLM with a 512K context on 8 GPUs: skip %q, want the simulator's reason", cs[0].Skip)
				}
			},
		},
		{
			name:    "over 200 candidates is refused",
			text:    "version: 1\nbase: base.yaml\naxes:\n  - path: recipe.copies\n    values: [" + seq(1, 15) + "]\n  - path: recipe.usd_per_gpu_hour\n    values: [" + seq(1, 14) + "]\n",
			wantErr: "the axes make 210 candidates (copies 15 x usd_per_gpu_hour 14), over the 200 one search runs",
		},
		{
			name:    "recommend's own fields cannot be set",
			text:    "version: 1\nbase: base.yaml\nset: {time_scale: 100}\naxes:\n  - {path: recipe.copies, values: [1]}\n",
			wantErr: "time_scale is set by recommend",
		},
		{
			name:    "an unknown field",
			text:    "version: 1\nbase: base.yaml\naxis:\n  - {path: recipe.copies, values: [1]}\n",
			wantErr: "field axis not found",
		},
		{
			name:    "an axis with neither values nor options",
			text:    "version: 1\nbase: base.yaml\naxes:\n  - {path: recipe.copies}\n",
			wantErr: "axes[0].values: list the values of recipe.copies",
		},
		{
			name:    "a base that is not there",
			text:    "version: 1\nbase: nowhere.yaml\naxes:\n  - {path: recipe.copies, values: [1]}\n",
			wantErr: "space.yaml:2: base: open",
		},
		{
			name:    "a real endpoint",
			text:    "version: 1\nbase: base.yaml\nset: {recipe.endpoint: 'http://127.0.0.1:8000', recipe.metrics: ['http://127.0.0.1:8000/metrics'], recipe.sim: null}\naxes:\n  - {path: recipe.copies, values: [1]}\n",
			wantErr: `recommend searches recipes on the built-in simulator, so its endpoint must be "sim"`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Load(writeSpace(t, c.text))
			var cs []Candidate
			if err == nil {
				cs, err = s.Candidates()
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one with %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != c.candidates {
				t.Fatalf("%d candidates, want %d", len(cs), c.candidates)
			}
			c.check(t, cs)
		})
	}
}

func seq(a, b int) string {
	var w []string
	for i := a; i <= b; i++ {
		w = append(w, fmt.Sprint(i))
	}
	return strings.Join(w, ", ")
}
