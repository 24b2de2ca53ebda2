package rig

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/timescale"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/sim"
)

// Endpoint is where the run sends load and reads metrics: the recipe's, or
// the built-in simulated gateway started on a loopback port when the recipe
// says "sim". stop shuts the simulator down (a no-op otherwise).
func Endpoint(cfg config.Run, progress io.Writer) (endpoint string, metrics []string, stop func(), err error) {
	if cfg.TimeScale.Virtual() {
		return "", nil, nil, errors.New("time_scale: virtual runs inside `headroom run` or `headroom simulate`, which hold the virtual clock")
	}
	endpoint, metrics, _, stop, err = EndpointOn(cfg, progress, nil)
	return endpoint, metrics, stop, err
}

// EndpointOn is Endpoint for a run on clock: on a virtual clock the
// simulator is served in memory, and rt is the round tripper that reaches it
// (nil otherwise). clock may be nil for a wall clock of the run's scale.
func EndpointOn(cfg config.Run, progress io.Writer, clock *timescale.Clock) (endpoint string, metrics []string, rt http.RoundTripper, stop func(), err error) {
	if cfg.Recipe.Endpoint != config.SimEndpoint {
		return cfg.Recipe.Endpoint, cfg.Recipe.Metrics, nil, func() {}, nil
	}
	opts, err := SimOptions(cfg.Recipe)
	if err != nil {
		return "", nil, nil, nil, err
	}
	opts.Scale, opts.Seed = cfg.TimeScale.Wall(), cfg.Workload.Seed
	if clock != nil && clock.Virtual() {
		opts.Clock, opts.Net = clock, memnet.New(clock)
		rt = opts.Net.Transport()
	}
	url, stopSim, err := StartSim(cfg.Recipe, opts, "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, nil, err
	}
	if progress != nil {
		fmt.Fprintf(progress, "simulated gateway at %s (%s personality, profile %s, %d cop%s, time scale %s)\n",
			url, opts.Personality, opts.Profile.Name, max(cfg.Recipe.Copies, 1), map[bool]string{true: "ies", false: "y"}[cfg.Recipe.Copies > 1], cfg.TimeScale)
	}
	return url, []string{url + "/metrics"}, rt, func() { stopSim() }, nil
}

// StartSim serves the simulated gateway on addr: one engine, or the
// recipe's copies behind its router, with prefill split from decode when the
// recipe's sim section names a link. It returns the base URL and a stop.
func StartSim(rc config.Recipe, opts sim.Options, addr string) (string, func() error, error) {
	var s interface {
		Start(string) (string, error)
		Close() error
	}
	var err error
	l, _ := config.SimLayoutOf(rc)
	// a recipe read through a gateway's names (gen_ai) is served behind the
	// simulated gateway even with one copy: a bare engine reports none
	if l.Copies > 1 || l.PrefillEngines > 0 || strings.EqualFold(rc.Mapping, "gen_ai") {
		co := sim.ClusterOptions{Options: opts, Copies: l.Copies, Router: strings.ReplaceAll(rc.Router, "-", "_")}
		if l.PrefillEngines > 0 {
			_, prefill, err := simProfiles(rc, opts.Personality)
			if err != nil {
				return "", nil, err
			}
			co.Disaggregated = &sim.Disaggregation{LinkBytesPerSecond: l.LinkBytesPerSecond, Prefill: prefill}
		}
		s, err = sim.NewCluster(co)
	} else {
		s, err = sim.New(opts)
	}
	if err != nil {
		return "", nil, fmt.Errorf("recipe: the simulated gateway: %w", err)
	}
	url, err := s.Start(addr)
	if err != nil {
		return "", nil, fmt.Errorf("start the simulated gateway on %s: %w (is the port free?)", addr, err)
	}
	return url, s.Close, nil
}

// SimOptions reads the recipe's simulator section: profile (a built-in
// name or a file), personality (default: the recipe's engine) and faults.
func SimOptions(rc config.Recipe) (sim.Options, error) {
	var o sim.Options
	o.Personality = rc.Sim.Personality
	if o.Personality == "" {
		o.Personality = "vllm"
		if strings.EqualFold(rc.Engine, "sglang") {
			o.Personality = "sglang"
		}
	}
	serve, _, err := simProfiles(rc, o.Personality)
	if err != nil {
		return o, err
	}
	o.Profile = serve
	if len(rc.Sim.Faults) > 0 {
		f, err := sim.ParseFaults(rc.Sim.Faults)
		if err != nil {
			return o, fmt.Errorf("recipe.sim.faults: %w", err)
		}
		o.Faults = f
	}
	return o, nil
}

// simProfiles are the profiles of the recipe's engines: the copies' and,
// with a prefill/decode split, the prefill engine's, each sized to the GPUs
// recipe.sim gives it (gpus_per_copy, prefill_gpus) with its share of the
// host cache.
func simProfiles(rc config.Recipe, personality string) (sim.Profile, *sim.Profile, error) {
	name := rc.Sim.Profile
	p, sizing, err := sim.LookupProfile(name, rc.Path(name))
	if err != nil {
		return sim.Profile{}, nil, fmt.Errorf("recipe.sim.profile: %q is neither a built-in profile (%s) nor a readable profile file: %w", name, strings.Join(sim.ProfileNames(), ", "), err)
	}
	p.Model = rc.Model
	if p, _, err = p.WithArgs(rc.Args); err != nil {
		return sim.Profile{}, nil, fmt.Errorf("recipe.args against sim profile %q: %w", name, err)
	}
	l, _ := config.SimLayoutOf(rc)
	if err := pricedAsUsed(rc, l, sizing); err != nil {
		return sim.Profile{}, nil, err
	}
	top := sim.Topology{Copies: l.Copies, GPUsPerCopy: l.GPUsPerCopy, PrefillEngines: l.PrefillEngines, PrefillGPUs: l.PrefillGPUs,
		HostCacheBytesPerGPU: l.HostCacheBytesPerGPU, HostBytesPerSecondPerGPU: l.HostBytesPerSecondPerGPU}
	serve, prefill, err := top.Profiles(p, sizing, personality)
	if err != nil {
		return sim.Profile{}, nil, fmt.Errorf("recipe.sim: %w", err)
	}
	return serve, prefill, nil
}

// pricedAsUsed checks that engines run as their profile is written (no
// recipe.sim.gpus_per_copy) use the GPUs the recipe is priced on: two copies
// of a 16-GPU engine on a recipe that pays for 16 GPUs would hold twice the
// sessions for the price of one, and every cost figure would be half what it
// is. A profile that says nothing of its GPUs is not checked.
func pricedAsUsed(rc config.Recipe, l config.SimLayout, sizing *sim.Sizing) error {
	paid := rc.Nodes * rc.GPUsPerNode
	if sizing == nil || sizing.GPUs <= 0 || paid <= 0 || l.GPUsPerCopy > 0 {
		return nil
	}
	prefill := l.PrefillGPUs
	if prefill == 0 {
		prefill = sizing.GPUs
	}
	used := l.Copies*sizing.GPUs + l.PrefillEngines*prefill
	if used == paid {
		return nil
	}
	what := fmt.Sprintf("%d cop%s of the profile's %d-GPU engine", l.Copies, map[bool]string{true: "ies", false: "y"}[l.Copies > 1], sizing.GPUs)
	if l.PrefillEngines > 0 {
		what += fmt.Sprintf(" and a %d-GPU prefill engine", prefill)
	}
	return fmt.Errorf("recipe: %s use %d GPUs, but the recipe is priced on nodes x gpus_per_node = %d x %d = %d: set recipe.nodes to what the engines use, or recipe.sim.gpus_per_copy to share the %d GPUs between the copies",
		what, used, rc.Nodes, rc.GPUsPerNode, paid, paid)
}
