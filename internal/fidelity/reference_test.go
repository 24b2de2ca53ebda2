package fidelity

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/sim"
)

// engines resolves a run file's simulated engines as the simulator is given
// them: its layout, the profile resized to each engine's GPUs.
func engines(t *testing.T, rc config.Recipe) (config.SimLayout, sim.Profile, *sim.Profile) {
	t.Helper()
	l, errs := config.SimLayoutOf(rc)
	if len(errs) > 0 {
		t.Fatalf("layout: %v", errs)
	}
	p, sizing, err := sim.LookupProfile(rc.Sim.Profile, rc.Path(rc.Sim.Profile))
	if err != nil {
		t.Fatal(err)
	}
	personality := rc.Sim.Personality
	if personality == "" {
		personality = rc.Engine
	}
	top := sim.Topology{
		Copies: l.Copies, GPUsPerCopy: l.GPUsPerCopy, PrefillEngines: l.PrefillEngines, PrefillGPUs: l.PrefillGPUs,
		HostCacheBytesPerGPU: l.HostCacheBytesPerGPU, HostBytesPerSecondPerGPU: l.HostBytesPerSecondPerGPU,
	}
	copies, prefill, err := top.Profiles(p, sizing, personality)
	if err != nil {
		t.Fatal(err)
	}
	return l, copies, prefill
}

// TestReferenceRunFiles decodes every examples/reference run file strictly
// and checks it against its recipe as published: the engine, the nodes and
// GPUs it is priced on, copies, router, context, host cache, the
// prefill/decode split, the bar, the target and stress steps and today's
// mix; and that its engines, sized to their GPUs, use exactly the GPUs the
// recipe pays for.
func TestReferenceRunFiles(t *testing.T) {
	f := loadPublished(t)
	files, _ := filepath.Glob(filepath.Join(referenceDir, "*.yaml"))
	var runFiles []string
	for _, p := range f.Recipes {
		runFiles = append(runFiles, p.RunFile)
	}
	for _, path := range files {
		if base := filepath.Base(path); base != "published.yaml" && !slices.Contains(runFiles, base) {
			t.Errorf("%s is a run file no published recipe names", base)
		}
	}
	tib := math.Pow(2, 40)
	// The report's router as the simulator's: EndpointPicker "with a long
	// prefix match keeps each conversation on its cache" (recipes table, row 3).
	routers := map[string]string{"EndpointPicker": "prefix-affinity"}
	for _, p := range f.Recipes {
		t.Run(p.RunFile, func(t *testing.T) {
			cfg, err := config.Load(filepath.Join(referenceDir, p.RunFile))
			if err != nil {
				t.Fatal(err)
			}
			rc, s := cfg.Recipe, p.Setup
			if rc.Endpoint != config.SimEndpoint || rc.Engine != s.Engine || rc.Nodes != s.Nodes || rc.Nodes*rc.GPUsPerNode != s.GPUs {
				t.Errorf("recipe %s on %s, %d nodes x %d GPUs: want %s on %d nodes, %d GPUs", rc.Engine, rc.Endpoint, rc.Nodes, rc.GPUsPerNode, s.Engine, s.Nodes, s.GPUs)
			}
			if got, want := float64(rc.Nodes*rc.GPUsPerNode)*rc.USDPerGPUHour, float64(s.Nodes)*f.Price.USDPerNodeHour; math.Abs(got-want) > 1e-9 {
				t.Errorf("priced at $%g an hour, the report's %d nodes cost $%g", got, s.Nodes, want)
			}
			if want := routers[s.Router]; rc.Router != want && s.Router != "" {
				t.Errorf("router %q, want %q for the report's %s", rc.Router, want, s.Router)
			}
			l, copies, prefill := engines(t, rc)
			if l.Copies != s.Copies || l.PrefillEngines != s.PrefillEngines {
				t.Errorf("%d copies and %d prefill engines, want %d and %d", l.Copies, l.PrefillEngines, s.Copies, s.PrefillEngines)
			}
			if l.GPUsPerCopy == 0 || l.Copies*l.GPUsPerCopy+l.PrefillEngines*l.PrefillGPUs != s.GPUs {
				t.Errorf("engines of %d GPUs (prefill %d): want them to add up to the %d GPUs priced", l.GPUsPerCopy, l.PrefillGPUs, s.GPUs)
			}
			// The served context: recipe.max_model_len, or the engines' when
			// the run file leaves it to them (recipe 4's decode copies hold
			// less than one 512K sequence).
			served := rc.MaxModelLen
			if served == 0 {
				served = copies.MaxModelLen
			}
			switch {
			case rc.MaxModelLen == 0 && s.PrefillEngines == 0:
				t.Errorf("max_model_len is unset: want the report's %d", s.ContextTokens)
			case rc.MaxModelLen > 0 && (served != s.ContextTokens || copies.MaxModelLen != s.ContextTokens):
				t.Errorf("context %d (engines %d), want %d", served, copies.MaxModelLen, s.ContextTokens)
			}
			if want := s.HostCacheTiBPerNode * tib; math.Abs(l.HostCacheBytesPerGPU*float64(rc.GPUsPerNode)-want) > 1 {
				t.Errorf("host cache %.3g bytes a node, want %.3g (%g TiB)", l.HostCacheBytesPerGPU*float64(rc.GPUsPerNode), want, s.HostCacheTiBPerNode)
			}
			if s.HostCacheTiBPerNode > 0 {
				// Each copy spans gpus_per_copy / 8 nodes and keeps their host RAM.
				nodes := float64(l.GPUsPerCopy) / float64(rc.GPUsPerNode)
				if want := int(s.HostCacheTiBPerNode * tib * nodes / copies.KVBytesPerToken); copies.HostCacheTokens != want {
					t.Errorf("host tier %d tokens a copy, want %d", copies.HostCacheTokens, want)
				}
				if !slices.Contains(rc.Args, "--enable-hierarchical-cache") {
					t.Errorf("args %v lack HiCache's --enable-hierarchical-cache", rc.Args)
				}
			} else if copies.HostCacheTokens != 0 {
				t.Errorf("a host tier of %d tokens the report does not have", copies.HostCacheTokens)
			}
			if s.PrefillEngines > 0 {
				// TCP: 10 GbE is about 1.25e9 bytes/s; RDMA is tens of GB/s.
				if s.KVLink != "tcp" || !(l.LinkBytesPerSecond > 0 && l.LinkBytesPerSecond <= 1.25e10) {
					t.Errorf("link %g bytes/s for the report's %q", l.LinkBytesPerSecond, s.KVLink)
				}
				// Engine size follows the GPUs: the 8-GPU decode copies keep
				// well under a third of the 16-GPU prefill engine's KV.
				if prefill == nil || copies.KVCapacityTokens*3 > prefill.KVCapacityTokens || copies.PrefillTokensPerSecond*2 != prefill.PrefillTokensPerSecond {
					t.Errorf("decode copy %+v, prefill engine %+v: want the decode copies sized to 8 GPUs, the prefill engine to 16", copies, prefill)
				}
				if rc.Mapping != "gen_ai" {
					t.Errorf("mapping %q: a split is judged at the gateway (gen_ai)", rc.Mapping)
				}
			} else if prefill != nil {
				t.Error("a prefill engine the report does not have")
			}
			b := cfg.Bar
			if b.TTFTP90S != f.Bar.TTFTP90S || b.InteractivityP90TPS != f.Bar.InteractivityP90TPS || b.ErrorRate != f.Bar.ErrorRate {
				t.Errorf("bar %+v, want the report's %+v", b, f.Bar)
			}
			sw := cfg.Sweep
			if sw.Target != f.Bar.Target || sw.Stress != f.Bar.Stress || sw.StepS != 600 || sw.Ladder[len(sw.Ladder)-1] != f.Bar.Stress || !slices.Contains(sw.Ladder, f.Baseline.Sessions) {
				t.Errorf("sweep target %d stress %d step %g s ladder %v: want 15, 20, 10-minute steps (the report's 60-75 minute sweep), a ladder through 10 ending at 20", sw.Target, sw.Stress, sw.StepS, sw.Ladder)
			}
			if cfg.Workload.Mix.Heavy != 0.5 || cfg.Workload.Mix.Light != 0.5 {
				t.Errorf("mix %+v, want today's half-and-half", cfg.Workload.Mix)
			}
			if p.Recipe == 2 && !(cfg.Workload.MaxOver() > 0.5) {
				t.Errorf("recipe 2 stops in pre-flight on its over-context turns (max_over_context %g): the report sent them", cfg.Workload.MaxOver())
			}
			if !strings.HasPrefix(rc.Name, "ref-") {
				t.Errorf("recipe name %q", rc.Name)
			}
		})
	}
}
