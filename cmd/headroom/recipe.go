package main

import (
	"fmt"
	"io"

	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/spf13/cobra"
)

func recipeCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recipe",
		Short: "Compare recipe files and check the one-change rule",
	}
	diff := &cobra.Command{
		Use:     "diff A B",
		Short:   "Show what changed from recipe A to recipe B, and how many things that is",
		Example: `  headroom recipe diff recipes/0-vllm.yaml recipes/1-sglang.yaml`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := recipe.Load(args[0])
			if err != nil {
				return err
			}
			b, err := recipe.Load(args[1])
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(stdout, recipe.DiffText(a, b))
			return err
		},
	}
	lint := &cobra.Command{
		Use:   "lint CANDIDATE [PARENT]",
		Short: "Warn when a candidate changes more than one thing from its parent (the method's one-change rule)",
		Long: `lint compares a candidate recipe with its parent (the file given, or the
candidate's own parent field) and warns when it changes more than one thing,
so a win cannot be pinned on one change. It exits 2 when there are warnings.`,
		Example: `  headroom recipe lint recipes/5-sglang-hicache.yaml
  headroom recipe lint candidate.yaml recipes/0-vllm.yaml`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cand, err := recipe.Load(args[0])
			if err != nil {
				return err
			}
			parentPath := ""
			if len(args) == 2 {
				parentPath = args[1]
			} else if p, ok := cand.ParentFile(); ok {
				parentPath = p
			} else {
				return fmt.Errorf("%s names no parent recipe file: give the parent as a second argument", args[0])
			}
			parent, err := recipe.Load(parentPath)
			if err != nil {
				return err
			}
			warnings := recipe.Lint(cand, parent)
			if len(warnings) == 0 {
				fmt.Fprintf(stdout, "%s changes one thing or less from %s\n", args[0], parentPath)
				return nil
			}
			for _, w := range warnings {
				fmt.Fprintf(stdout, "warning: %s\n", w)
			}
			return exitError{code: 2}
		},
	}
	cmd.AddCommand(diff, lint)
	return cmd
}
