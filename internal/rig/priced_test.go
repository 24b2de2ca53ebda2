package rig

import (
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
)

// TestCopiesArePriced: `--set recipe.copies=2` on a recipe priced for one
// engine's GPUs ran two full engines at one engine's price, halving every
// cost figure; it is now refused with what to set, and a recipe whose
// nodes pay for every engine runs.
func TestCopiesArePriced(t *testing.T) {
	base := config.Default().Recipe // 2 nodes x 8 GPUs, the default 16-GPU profile
	cases := []struct {
		name string
		set  func(*config.Recipe)
		want string // "" to run
	}{
		{"one copy", func(*config.Recipe) {}, ""},
		{"two copies, one copy's price", func(r *config.Recipe) { r.Copies = 2 }, "use 32 GPUs, but the recipe is priced on nodes x gpus_per_node = 2 x 8 = 16"},
		{"two copies on four nodes", func(r *config.Recipe) { r.Copies, r.Nodes = 2, 4 }, ""},
		{"two copies sharing the GPUs", func(r *config.Recipe) { r.Copies, r.Sim.GPUsPerCopy = 2, 8 }, ""},
	}
	for _, c := range cases {
		rc := base
		c.set(&rc)
		_, _, err := simProfiles(rc, "sglang") // SGLang caps its context at what 8 GPUs hold
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}
