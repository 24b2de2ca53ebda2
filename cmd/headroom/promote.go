package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/deploy"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/spf13/cobra"
)

// newDeployer makes the deployer a recipe names; tests pass a fake.
type newDeployer func(recipe.Recipe, deploy.Env) (deploy.Deployer, error)

func promoteCmd(stdout, stderr io.Writer) *cobra.Command {
	return promoteCmdWith(stdout, stderr, deploy.New)
}

func promoteCmdWith(stdout, stderr io.Writer, newDep newDeployer) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "promote RUN_DIR [COMPARE_DIR...]",
		Short: "Put a run's candidate up again and keep it, labelled, when it held the target and was the cheapest",
		Long: `promote decides, as deploy.promote: on_target does at the end of a run,
whether the candidate of RUN_DIR is kept: its target passed (never too close,
no data or fail), the run ended without an error, and its $ per
session-hour interval lies wholly below that of every run compared that held
the same target on the same bar. The runs compared are COMPARE_DIR..., or
else the latest run of the recipe's parent under the run's output folder.

When it is, promote deploys the candidate again from the recipe in
RUN_DIR/config.yaml (recipe.deploy.type kubernetes), waits until it serves,
and keeps it instead of rolling back, labelling every object
headroom.dev/promoted=<recipe>-<time>. If the deploy or the label fails, the
previous recipe is put back. --dry-run only prints the decision.

Exit status: 0 promoted (or would be, with --dry-run); 1 not promoted or an
error, with the reason.`,
		Example: `  headroom promote runs/recipe-1/20261201T093000Z --dry-run
  headroom promote runs/recipe-1/20261201T093000Z runs/recipe-0/20261130T093000Z`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := report.OpenDir(args[0])
			if err != nil {
				return fmt.Errorf("promote: %w", err)
			}
			cfg, err := config.Load(d.File("config.yaml"))
			if err != nil {
				return fmt.Errorf("promote: %s is not a finished run directory: %w", d.Path(), err)
			}
			run, err := report.LoadRun(d)
			if err != nil {
				return fmt.Errorf("promote: %w", err)
			}
			if run.Partial {
				return fmt.Errorf("promote: %s has no summary.json (the run did not finish); only a finished run can be promoted", d.Path())
			}
			sum := run.Summary
			if sum.RunDir == "" {
				sum.RunDir = d.Path()
			}
			cfg.Deploy.Promote = config.PromoteOnTarget
			if len(args) > 1 {
				cfg.Deploy.Compare = args[1:]
			}
			p := rig.DecidePromotion(cfg, sum)
			fmt.Fprintf(stdout, "%s: %s\n", cfg.Recipe.Name, p.Reason)
			if !p.Promote {
				return exitError{code: 1}
			}
			if dryRun {
				return nil
			}
			return promoteRun(cmd.Context(), cfg, p, stdout, stderr, newDep)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the decision; deploy nothing")
	return cmd
}

// promoteRun deploys the candidate and keeps it; on any failure it puts
// the previous recipe back.
func promoteRun(ctx context.Context, cfg config.Run, p rig.Promotion, stdout, stderr io.Writer, newDep newDeployer) error {
	conn, err := cfg.Recipe.EndpointAuth().Resolve("recipe", nil, cfg.Recipe.Dir)
	if err != nil {
		return fmt.Errorf("promote: %s", recipe.EndpointField(err.Error()))
	}
	dep, err := newDep(cfg.Recipe, deploy.Env{Stdout: stderr, Stderr: stderr, Environ: os.Environ(), Log: stderr,
		HTTP: conn.Client(10 * time.Second)})
	if err != nil {
		return fmt.Errorf("promote: recipe.deploy: %w", err)
	}
	err = dep.Deploy(ctx)
	if err == nil {
		err = dep.Ready(ctx)
	}
	if err == nil {
		if err = deploy.Promote(ctx, dep, p.RunID); err == nil {
			fmt.Fprintf(stdout, "%s: kept and labelled %s=%s\n", cfg.Recipe.Name, deploy.PromotedLabel, deploy.LabelValue(p.RunID))
			return nil
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deploy.RollbackTimeout(cfg.Recipe))
	defer cancel()
	return errors.Join(fmt.Errorf("promote: %w", err), dep.Rollback(rctx))
}
