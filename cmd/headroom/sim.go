package main

import (
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/spf13/cobra"
)

func simCmd(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "The built-in simulated gateway (an engine that behaves like vLLM)",
	}
	var (
		host  string
		port  int
		scale float64
		seed  uint64
	)
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the simulated gateway: OpenAI chat completions, /v1/models, /health and vLLM /metrics",
		Example: `  headroom sim serve --port 8000
  curl -s localhost:8000/v1/models
  curl -s localhost:8000/metrics | grep vllm:time_to_first_token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("--host %q: the simulator serves only on loopback (127.0.0.1 or ::1)", host)
			}
			s, err := sim.New(sim.Options{Profile: sim.DefaultProfile(), Scale: scale, Seed: seed})
			if err != nil {
				return err
			}
			url, err := s.Start(net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("serve on port %d: %w (is the port free?)", port, err)
			}
			p := sim.DefaultProfile()
			fmt.Fprintf(stderr, "simulated gateway serving %s at %s (metrics at %s/metrics, time scale %g); Ctrl-C stops it\n", p.Model, url, url, scale)
			<-cmd.Context().Done()
			return s.Close()
		},
	}
	serve.Flags().StringVar(&host, "host", "127.0.0.1", "loopback address to listen on")
	serve.Flags().IntVar(&port, "port", 8000, "port to listen on (0 picks a free one)")
	serve.Flags().Float64Var(&scale, "scale", 1, "modelled seconds per wall second (metrics stay in modelled seconds)")
	serve.Flags().Uint64Var(&seed, "seed", 1, "seed for the simulator's choices")
	cmd.AddCommand(serve)
	return cmd
}
