package rig

import (
	"context"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
)

// The default run on a virtual clock: the whole recipe run in modelled time,
// in seconds of wall time.
func TestVirtualDefaultRun(t *testing.T) {
	cfg := config.Default()
	cfg.TimeScale = config.Virtual
	cfg.Output = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	wall := time.Now()
	sum, err := Run(context.Background(), Options{Config: cfg})
	took := time.Since(wall)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, s := range sum.Steps {
		t.Logf("%d sessions: %s", s.Sessions, s.Verdict)
	}
	t.Logf("capacity %s; %v wall", sum.Capacity, took)
}
