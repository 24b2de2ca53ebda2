// Command headroom measures how many concurrent agent sessions a serving
// recipe holds within the bar, and what each costs.
//
// This package only parses flags and wires the internal packages together;
// main calls run and exits non-zero when it returns an error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	ossignal "os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := ossignal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "headroom:", err)
		os.Exit(1)
	}
}

// exitError carries an exit code for an outcome that is not a rig error and
// has already been reported.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run executes the command line args with the given output streams.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := rootCmd(stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

func rootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "headroom",
		Short: "How many concurrent agent sessions does this serving recipe hold within the bar, and what does each cost?",
		Long: `headroom replays real agentic coding traffic against an OpenAI-compatible
gateway, steps concurrent sessions up until a step misses the bar (P90 TTFT,
P90 tokens/s per user, errors), judges each step only on what the server
reports, with 95% bootstrap intervals, and reports capacity and cost.

With no run file, 'headroom run' rehearses everything against the built-in
simulated gateway: no GPU, no cluster and no network needed.`,
		Example: `  # the built-in default: simulated gateway, AgentX-like mix, reference bar
  headroom run

  # a real endpoint described by a run file, summary as JSON
  headroom run -f examples/run.yaml --json

  # the simulated gateway on its own, for other tools to hit
  headroom sim serve --port 8000`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       fullVersion(),
	}
	root.AddCommand(runCmd(stdout, stderr), planCmd(stdout), evalCmd(stdout, stderr), judgeCmd(stdout), reportCmd(stdout), compareCmd(stdout), recipeCmd(stdout), simCmd(stdout, stderr), tracesCmd(stdout), rehearseCmd(stdout, stderr), smokeCmd(stdout, stderr))
	root.AddCommand(runsCmd(stdout, stderr))
	root.AddCommand(simulateCmd(stdout, stderr))
	root.AddCommand(promoteCmd(stdout, stderr))
	root.AddCommand(recommendCmd(stdout, stderr))
	root.AddCommand(recordCmd(stderr))
	root.AddCommand(canaryCmd(stdout, stderr))
	root.AddCommand(shardCmd(stderr))
	return root
}
