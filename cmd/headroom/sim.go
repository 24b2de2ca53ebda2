package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/spf13/cobra"
)

func simCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "The built-in simulated gateway (an engine that behaves like vLLM or SGLang, and fails on demand)",
	}
	var (
		host, profile, personality, faults, router, model string
		port, copies                                      int
		scale, pdLink                                     float64
		seed                                              uint64
	)
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the simulated gateway: OpenAI chat completions, /v1/models, /health, /tokenize and engine /metrics",
		Long: `serve runs the simulated gateway on a loopback port for other tools to hit.
Its metrics use the personality's real names and buckets (vllm:* or sglang:*)
in modelled seconds. Faults can be set at start (--faults) or at run time by
POSTing the same JSON to /admin/faults from loopback. Built-in profiles: ` + strings.Join(sim.ProfileNames(), ", ") + `.`,
		Example: `  headroom sim serve --port 8000
  headroom sim serve --personality sglang --profile glm-16xrtx6000-128k
  headroom sim serve --copies 2 --router prefix_affinity
  headroom sim serve --pd-link 1.25e9          # prefill/decode split over plain 10 GbE TCP
  headroom sim serve --faults '{"refuse": {"share": 0.1, "status": 429}}'
  curl -s localhost:8000/metrics | grep vllm:time_to_first_token
  curl -s -XPOST localhost:8000/admin/faults -d '{"stall": {"at_s": 0, "for_s": 30}}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("--host %q: the simulator serves only on loopback (127.0.0.1 or ::1)", host)
			}
			rc := config.Recipe{Model: model, Engine: personality, Copies: copies, Router: router}
			rc.Sim.Profile, rc.Sim.Personality = profile, personality
			if faults != "" {
				raw := []byte(faults)
				if strings.HasPrefix(faults, "@") {
					b, err := os.ReadFile(faults[1:])
					if err != nil {
						return fmt.Errorf("--faults: %w", err)
					}
					raw = b
				}
				if !json.Valid(raw) {
					return fmt.Errorf("--faults: not JSON: give an object like {\"stall\": {\"at_s\": 10, \"for_s\": 30}} or @file.json")
				}
				rc.Sim.Faults = raw
			}
			opts, err := rig.SimOptions(rc)
			if err != nil {
				return err
			}
			if model == "" {
				opts.Profile.Model = profileModel(profile)
			}
			opts.Scale, opts.Seed = scale, seed
			rc.Sim.PDLinkBytesPerSecond = pdLink
			url, closer, err := rig.StartSim(rc, opts, net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "simulated gateway serving %s at %s (%s, profile %s, metrics at %s/metrics, time scale %g); Ctrl-C stops it\n",
				opts.Profile.Model, url, opts.Personality, opts.Profile.Name, url, scale)
			<-cmd.Context().Done()
			return closer()
		},
	}
	serve.Flags().StringVar(&host, "host", "127.0.0.1", "loopback address to listen on")
	serve.Flags().IntVar(&port, "port", 8000, "port to listen on (0 picks a free one)")
	serve.Flags().Float64Var(&scale, "scale", 1, "modelled seconds per wall second (metrics stay in modelled seconds)")
	serve.Flags().Uint64Var(&seed, "seed", 1, "seed for the simulator's choices")
	serve.Flags().StringVar(&profile, "profile", "", "built-in profile name or profile file (default: the reference report's recipe 0)")
	serve.Flags().StringVar(&personality, "personality", "vllm", "engine to behave like: vllm or sglang")
	serve.Flags().StringVar(&faults, "faults", "", "faults to inject, as JSON or @file.json (see docs/simulator.md)")
	serve.Flags().IntVar(&copies, "copies", 1, "engine copies behind the gateway")
	serve.Flags().StringVar(&router, "router", sim.RoundRobin, "routing over copies: round_robin, least_loaded or prefix_affinity")
	serve.Flags().StringVar(&model, "model", "", "model id to serve (default: the profile's)")
	serve.Flags().Float64Var(&pdLink, "pd-link", 0, "split prefill from decode, handing KV over a link of this many bytes/s (1.25e9 = 10 GbE)")
	cmd.AddCommand(serve, calibrateCmd(), studyCmd(stdout, stderr), fidelityCmd(stdout, stderr))
	return cmd
}

// profileModel is the model id a profile serves by itself.
func profileModel(name string) string {
	if name == "" {
		return sim.DefaultProfile().Model
	}
	if p, err := sim.ProfileByName(name); err == nil {
		return p.Model
	}
	if p, err := sim.LoadProfile(name); err == nil {
		return p.Model
	}
	return sim.DefaultProfile().Model
}
