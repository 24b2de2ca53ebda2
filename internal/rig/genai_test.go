package rig

import (
	"context"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
)

// TestOneCopyGatewayMapping: a one-copy simulated recipe read through the
// gen_ai mapping is served behind the simulated gateway, whose /metrics
// carries those names; before, one copy was a bare
// engine and pre-flight refused the run for signals it does not report.
func TestOneCopyGatewayMapping(t *testing.T) {
	for _, mapping := range []string{"gen_ai"} {
		t.Run(mapping, func(t *testing.T) {
			cfg := shortRun(t, config.Virtual)
			cfg.Recipe.Mapping = mapping
			cfg.Sweep.Ladder, cfg.Sweep.StepS, cfg.Sweep.Target = []int{4}, 120, 4
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			sum, err := Run(context.Background(), Options{Config: cfg})
			if err != nil {
				t.Fatalf("one copy read through the %s mapping: %v", mapping, err)
			}
			if len(sum.Steps) != 1 || sum.Steps[0].Verdict == "no_data" {
				t.Fatalf("steps %+v: want one judged step", sum.Steps)
			}
		})
	}
}
