package config

import (
	"fmt"
	"math"
)

// SimLayout is how a simulated recipe's GPUs are split into engines, read
// from recipe.copies, the nodes and recipe.sim; the simulator resizes its
// profile to each engine's GPUs (sim.Topology).
type SimLayout struct {
	// Copies is the engines behind the router: the decode engines of a
	// prefill/decode split. At least 1.
	Copies int
	// GPUsPerCopy is each copy's GPUs; 0 runs the profile as written.
	GPUsPerCopy int
	// PrefillEngines is 1 with a prefill/decode split, else 0.
	PrefillEngines int
	// PrefillGPUs is the prefill engine's GPUs; 0 with no split or when
	// GPUsPerCopy is 0.
	PrefillGPUs int
	// LinkBytesPerSecond is the prefill-to-decode link of a split.
	LinkBytesPerSecond float64
	// HostCacheBytesPerGPU is the pinned host RAM each GPU's share of an
	// engine keeps KV in: recipe.sim.host_cache.tib_per_node over the
	// node's GPUs. 0 means no host cache.
	HostCacheBytesPerGPU float64
	// HostBytesPerSecondPerGPU is each GPU's host-to-GPU copy rate; 0 is
	// the simulator's default.
	HostBytesPerSecondPerGPU float64
}

// Engines is how many engines the layout runs: the copies and any prefill
// engine.
func (l SimLayout) Engines() int { return l.Copies + l.PrefillEngines }

// SimLayoutOf reads the simulated engines' layout from a recipe, and lists
// every problem, each naming its field: counts below zero, more than one
// prefill engine, prefill fields without a split, and GPUs per engine that
// do not add up to the nodes x gpus_per_node the price counts.
func SimLayoutOf(rc Recipe) (SimLayout, []string) {
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, field+": "+fmt.Sprintf(format, args...))
	}
	s := rc.Sim
	l := SimLayout{
		Copies: max(rc.Copies, 1), GPUsPerCopy: s.GPUsPerCopy, PrefillEngines: s.PrefillEngines,
		PrefillGPUs: s.PrefillGPUs, LinkBytesPerSecond: s.PDLinkBytesPerSecond,
	}
	if s.GPUsPerCopy < 0 {
		bad("recipe.sim.gpus_per_copy", "must be >= 0 (0 runs the profile as written), got %d", s.GPUsPerCopy)
	}
	if s.PrefillGPUs < 0 {
		bad("recipe.sim.prefill_gpus", "must be >= 0, got %d", s.PrefillGPUs)
	}
	if s.PDLinkBytesPerSecond < 0 || math.IsNaN(s.PDLinkBytesPerSecond) {
		bad("recipe.sim.pd_link_bytes_per_second", "must be >= 0 (0: no prefill/decode split), got %g", s.PDLinkBytesPerSecond)
	}
	split := s.PDLinkBytesPerSecond > 0
	switch {
	case s.PrefillEngines < 0 || s.PrefillEngines > 1:
		bad("recipe.sim.prefill_engines", "the simulator models one prefill engine (0 reads as 1 with pd_link_bytes_per_second), got %d", s.PrefillEngines)
	case s.PrefillEngines == 1 && !split:
		bad("recipe.sim.prefill_engines", "a prefill engine needs its link to the decode copies: set recipe.sim.pd_link_bytes_per_second (10 GbE TCP is about 1.25e9, RDMA about 5e10)")
	case split:
		l.PrefillEngines = 1
	}
	if !split && s.PrefillGPUs > 0 {
		bad("recipe.sim.prefill_gpus", "is set but there is no prefill/decode split: set recipe.sim.pd_link_bytes_per_second, or drop prefill_gpus")
	}
	if split && (s.GPUsPerCopy > 0) != (s.PrefillGPUs > 0) {
		bad("recipe.sim.prefill_gpus", "give the prefill engine's GPUs and each decode copy's (gpus_per_copy) together, or neither (every engine as the profile is written)")
	}
	total := rc.Nodes * rc.GPUsPerNode
	if s.GPUsPerCopy > 0 && (!split || s.PrefillGPUs > 0) && total > 0 {
		if used := l.Copies*s.GPUsPerCopy + l.PrefillEngines*s.PrefillGPUs; used != total {
			what := fmt.Sprintf("%d cop%s x %d GPUs", l.Copies, plural(l.Copies, "y", "ies"), s.GPUsPerCopy)
			if l.PrefillEngines > 0 {
				what += fmt.Sprintf(" + a %d-GPU prefill engine", s.PrefillGPUs)
			}
			bad("recipe.sim.gpus_per_copy", "%s is %d GPUs, but the recipe is priced on nodes x gpus_per_node = %d: the engines must use the GPUs the recipe pays for", what, used, total)
		}
	}
	if h := s.HostCache; h != nil {
		if !(h.TiBPerNode > 0) {
			bad("recipe.sim.host_cache.tib_per_node", "must be > 0 TiB of pinned host RAM per node (drop host_cache for none), got %g", h.TiBPerNode)
		}
		if h.BytesPerSecondPerGPU < 0 || math.IsNaN(h.BytesPerSecondPerGPU) {
			bad("recipe.sim.host_cache.bytes_per_second_per_gpu", "must be >= 0 (0: PCIe 5 x16, about 5e10), got %g", h.BytesPerSecondPerGPU)
		}
		if rc.GPUsPerNode > 0 && h.TiBPerNode > 0 {
			l.HostCacheBytesPerGPU = h.TiBPerNode * (1 << 40) / float64(rc.GPUsPerNode)
		}
		l.HostBytesPerSecondPerGPU = h.BytesPerSecondPerGPU
	}
	return l, errs
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
