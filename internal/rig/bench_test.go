package rig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// defaultVirtual is the built-in default run file on the virtual clock, as
// `headroom simulate` runs it.
func defaultVirtual(b *testing.B) config.Run {
	b.Helper()
	cfg := config.Default()
	cfg.TimeScale = config.Virtual
	cfg.Output = b.TempDir()
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	return cfg
}

// BenchmarkVirtualDefaultRun is `headroom simulate` with no run file, less
// the rendering of the report files.
func BenchmarkVirtualDefaultRun(b *testing.B) {
	cfg := defaultVirtual(b)
	for b.Loop() {
		sum, err := Run(context.Background(), Options{Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(sum.Capacity.Sessions, "capacity")
	}
}

// BenchmarkReferenceStudy sweeps the reference report's recipes
// (examples/reference/[0-9]-*.yaml) on today's mix, light-only and
// heavy-only: 3 sweeps a recipe, 24 for the 8. The recipes run at once,
// each on its own virtual clock, so they share the machine's cores.
func BenchmarkReferenceStudy(b *testing.B) {
	files, err := filepath.Glob("../../examples/reference/[0-9]-*.yaml")
	if err != nil || len(files) == 0 {
		b.Skipf("no reference recipes in examples/reference (%v)", err)
	}
	var cfgs []config.Run
	for _, f := range files {
		cfg, err := config.Load(f)
		if err != nil {
			b.Fatal(err)
		}
		cfg.TimeScale = config.Virtual
		cfg.Sweep.Mixes = []string{"today", "light", "heavy"}
		cfg.Output = b.TempDir()
		if err := cfg.Validate(); err != nil {
			b.Fatalf("%s: %v", f, err)
		}
		cfgs = append(cfgs, cfg)
	}
	for b.Loop() {
		sums := make([]report.Summary, len(cfgs))
		errs := make([]error, len(cfgs))
		var wg sync.WaitGroup
		for i := range cfgs {
			wg.Go(func() { sums[i], errs[i] = Run(context.Background(), Options{Config: cfgs[i]}) })
		}
		wg.Wait()
		sweeps := 0
		for i, sum := range sums {
			if errs[i] != nil {
				b.Fatalf("%s: %v", files[i], errs[i])
			}
			sweeps += 1 + len(sum.Mixes)
			line := fmt.Sprintf("%s: today %s", filepath.Base(files[i]), capacityText(sum.Capacity))
			for _, m := range sum.Mixes {
				line += fmt.Sprintf(", %s %s", m.Label(), capacityText(m.Capacity))
			}
			b.Log(line)
		}
		b.ReportMetric(float64(sweeps), "sweeps")
	}
}

func capacityText(c sweep.Capacity) string {
	if c.AtLeast {
		return fmt.Sprintf(">=%g", c.Sessions)
	}
	return fmt.Sprintf("%.1f [%.1f, %.1f] (%s)", c.Sessions, c.Lo, c.Hi, c.LimitedBy)
}

// fleetStep is one short step of many sessions on many copies: a fleet
// that must simulate without running out of memory.
func fleetStep(b *testing.B, sessions, copies int) config.Run {
	b.Helper()
	cfg := config.Default()
	cfg.TimeScale = config.Virtual
	cfg.Recipe.Copies = copies
	cfg.Recipe.Nodes = copies * cfg.Recipe.Nodes // each copy is the default 16-GPU engine, and is paid for
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{sessions}, sessions, 0
	// Every session primes its conversation first: 156 sessions a copy,
	// each prompt prefilled from nothing, take most of half an hour of
	// modelled time.
	cfg.Sweep.WarmupS, cfg.Sweep.StepS, cfg.Workload.PrimeTimeoutS = 1800, 90, 1800
	f := false
	cfg.Sweep.Repeat = &f
	cfg.Evals.Suites, cfg.Evals.UnderLoadShare = nil, 0
	cfg.Output = b.TempDir()
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	return cfg
}

// BenchmarkFleetStep runs one 10,000-session step on 64 copies
// (HEADROOM_BENCH_FLEET=sessions,copies changes them) and reports the
// process's peak resident memory (VmHWM) and the Go heap's peak. Run it
// alone: the peak is the process's.
func BenchmarkFleetStep(b *testing.B) {
	sessions, copies := 10000, 64
	if v := os.Getenv("HEADROOM_BENCH_FLEET"); v != "" {
		if _, err := fmt.Sscanf(v, "%d,%d", &sessions, &copies); err != nil {
			b.Fatalf("HEADROOM_BENCH_FLEET=%q: want sessions,copies such as 10000,64", v)
		}
	}
	// A soft memory limit makes the collector keep the heap near what is
	// live instead of twice that (GOGC's default); HEADROOM_BENCH_MEMLIMIT
	// (bytes, 0 for none) changes it, as GOMEMLIMIT does for headroom.
	limit := int64(12 << 30)
	if v := os.Getenv("HEADROOM_BENCH_MEMLIMIT"); v != "" {
		if _, err := fmt.Sscanf(v, "%d", &limit); err != nil {
			b.Fatalf("HEADROOM_BENCH_MEMLIMIT=%q: want bytes", v)
		}
	}
	if limit > 0 {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	}
	// HEADROOM_BENCH_HEAPPROFILE=FILE writes the heap profile (as of the
	// latest collection) each time the heap's peak has grown by a tenth:
	// the last one written shows what is live near the peak.
	profile := os.Getenv("HEADROOM_BENCH_HEAPPROFILE")
	cfg := fleetStep(b, sessions, copies)
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // wall-clock sampling, off the run's clock
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		profiled := uint64(256 << 20)
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			if v := peak.Load(); profile != "" && v > profiled+profiled/10 {
				profiled = v
				if err := writeHeapProfile(profile); err != nil {
					b.Error(err)
				}
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	for b.Loop() {
		sum, err := Run(context.Background(), Options{Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		if len(sum.Steps) != 1 {
			b.Fatalf("ran %d steps, want 1", len(sum.Steps))
		}
		b.Logf("%d sessions on %d copies: %s", sessions, copies, sum.Steps[0].Verdict)
	}
	close(stop)
	<-done
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(vmHWM(b))/(1<<10), "peak-rss-MiB")
}

// writeHeapProfile writes the heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// vmHWM is the process's peak resident set in KiB, from /proc/self/status.
func vmHWM(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb
		}
	}
	return 0
}
