package config

import (
	"strings"
	"testing"
)

// TestSimLayout reads recipe.sim's engine layout from the default run with
// its recipe changed: what each layout resolves to, and the field each bad
// one is reported under.
func TestSimLayout(t *testing.T) {
	base := string(defaultYAML)
	const sim = "  sim:\n    profile: default\n"
	if !strings.Contains(base, sim) || !strings.Contains(base, "  nodes: 2\n") {
		t.Fatal("test setup: default.yaml's recipe changed")
	}
	// with puts nodes and copies in the recipe and more lines in its sim section.
	with := func(nodes, copies, extra string) string {
		b := strings.Replace(base, "  nodes: 2\n", "  nodes: "+nodes+"\n  copies: "+copies+"\n", 1)
		return strings.Replace(b, sim, sim+extra, 1)
	}
	tib := float64(1 << 40)
	good := []struct {
		name string
		file string
		want SimLayout
	}{
		// Nothing said: one engine as the profile is written.
		{"plain", base, SimLayout{Copies: 1}},
		// The reference report's recipe 4: a 16-GPU prefill engine and two
		// 8-GPU decode copies on 4 nodes; prefill_engines reads as 1.
		{"prefill/decode", with("4", "2", "    gpus_per_copy: 8\n    prefill_gpus: 16\n    pd_link_bytes_per_second: 1.25e9\n"),
			SimLayout{Copies: 2, GPUsPerCopy: 8, PrefillEngines: 1, PrefillGPUs: 16, LinkBytesPerSecond: 1.25e9}},
		// A split with every engine as the profile is written.
		{"split unsized", with("4", "2", "    prefill_engines: 1\n    pd_link_bytes_per_second: 5e10\n"),
			SimLayout{Copies: 2, PrefillEngines: 1, LinkBytesPerSecond: 5e10}},
		// Recipe 6: two 16-GPU copies with 0.8 TiB of pinned host RAM per
		// node, a tenth of a TiB per GPU.
		{"host cache", with("4", "2", "    gpus_per_copy: 16\n    host_cache: {tib_per_node: 0.8, bytes_per_second_per_gpu: 2.5e10}\n"),
			SimLayout{Copies: 2, GPUsPerCopy: 16, HostCacheBytesPerGPU: 0.8 * tib / 8, HostBytesPerSecondPerGPU: 2.5e10}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.file), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			l, errs := SimLayoutOf(r.Recipe)
			if len(errs) > 0 || l != tc.want {
				t.Errorf("layout %+v (%v), want %+v", l, errs, tc.want)
			}
			if l.Engines() != tc.want.Copies+tc.want.PrefillEngines {
				t.Errorf("engines %d", l.Engines())
			}
		})
	}
	bad := []struct {
		name  string
		file  string
		field string
	}{
		// Two 16-GPU copies on 2 nodes would need 32 GPUs: the price counts 16.
		{"more GPUs than priced", with("2", "2", "    gpus_per_copy: 16\n"), "recipe.sim.gpus_per_copy"},
		// Fewer GPUs than priced: 8 GPUs would sit idle.
		{"fewer GPUs than priced", with("2", "1", "    gpus_per_copy: 8\n"), "recipe.sim.gpus_per_copy"},
		// The split's engines must add up too: 16 + 2 x 16 on 4 nodes.
		{"split over budget", with("4", "2", "    gpus_per_copy: 16\n    prefill_gpus: 16\n    pd_link_bytes_per_second: 1.25e9\n"), "recipe.sim.gpus_per_copy"},
		{"negative", with("2", "1", "    gpus_per_copy: -8\n"), "recipe.sim.gpus_per_copy"},
		// One prefill engine is modelled.
		{"two prefill engines", with("4", "2", "    prefill_engines: 2\n    pd_link_bytes_per_second: 1.25e9\n"), "recipe.sim.prefill_engines"},
		// A prefill engine needs its link.
		{"prefill without link", with("4", "2", "    prefill_engines: 1\n"), "recipe.sim.pd_link_bytes_per_second"},
		// Prefill GPUs without a split.
		{"prefill gpus alone", with("4", "2", "    gpus_per_copy: 16\n    prefill_gpus: 8\n"), "recipe.sim.prefill_gpus"},
		// A split sized on one side only.
		{"half sized split", with("4", "2", "    gpus_per_copy: 8\n    pd_link_bytes_per_second: 1.25e9\n"), "recipe.sim.prefill_gpus"},
		{"negative link", with("2", "1", "    pd_link_bytes_per_second: -1\n"), "recipe.sim.pd_link_bytes_per_second"},
		// A host cache of nothing.
		{"empty host cache", with("2", "1", "    host_cache: {tib_per_node: 0}\n"), "recipe.sim.host_cache.tib_per_node"},
		{"negative host rate", with("2", "1", "    host_cache: {tib_per_node: 0.8, bytes_per_second_per_gpu: -1}\n"), "recipe.sim.host_cache.bytes_per_second_per_gpu"},
		// Unknown fields in the sim section are refused.
		{"unknown", with("2", "1", "    host_cache: {tib_per_nodes: 0.8}\n"), "tib_per_nodes"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file), "test.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
}
