package fidelity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
)

// Mix is one of the three workloads every recipe is swept on.
type Mix string

// The study's mixes: the run file's own (today's half-and-half), and the
// light-only and heavy-only ladders the report sets beside it.
const (
	Today     Mix = "today"
	LightOnly Mix = "light"
	HeavyOnly Mix = "heavy"
)

// Mixes lists the study's mixes in the order they are reported.
func Mixes() []Mix { return []Mix{Today, LightOnly, HeavyOnly} }

// overrides are the --set changes that turn a run file into mix m's.
func (m Mix) overrides() []config.Override {
	set := func(path, v string) config.Override {
		return config.Override{Path: path, Value: v, Flag: "fidelity mix " + string(m)}
	}
	switch m {
	case LightOnly:
		return []config.Override{set("workload.mix.heavy", "0"), set("workload.mix.light", "1")}
	case HeavyOnly:
		return []config.Override{set("workload.mix.heavy", "1"), set("workload.mix.light", "0")}
	}
	return nil
}

// StudyOptions says what to sweep and where.
type StudyOptions struct {
	// Dir holds published.yaml and the run files it names.
	Dir string
	// Published is the report's results; a zero File is loaded from Dir.
	Published File
	// Recipes to run (nil: every recipe published) and Mixes (nil: all three).
	Recipes []int
	Mixes   []Mix
	// Only, when set, runs just these sweeps (of Recipes x Mixes).
	Only []Key
	// Sets are applied to every run file after its mix (a test's shorter
	// steps, say); empty for the study as the files are written.
	Sets []config.Override
	// Workers is how many sweeps run at once (default 2); each runs on its
	// own virtual clock.
	Workers int
	// Output is where the run directories go, one folder per sweep.
	Output string
	// Progress gets a line per finished sweep; nil is quiet.
	Progress io.Writer
}

// Key names one sweep of the study: a recipe on a mix.
type Key struct {
	Recipe int
	Mix    Mix
}

// Sweep is one recipe on one mix, as simulated.
type Sweep struct {
	Recipe  int            `json:"recipe"`
	Mix     Mix            `json:"mix"`
	File    string         `json:"file"`
	Summary report.Summary `json:"summary"`
	// KVPeak is the fullest the KV cache was at any scrape of the run (the
	// fullest copy); nil when the mapping reads no KV gauge.
	KVPeak *float64 `json:"kv_peak,omitempty"`
	// StepKV is the KV cache's use over each step's judged time, in the
	// order of Summary.Steps (a step no scrape fell in is left out); empty
	// when the mapping reads no KV gauge.
	StepKV []KVUse `json:"step_kv,omitempty"`
	// WallS is how long the sweep took to simulate.
	WallS float64 `json:"wall_s"`
	// Err is why the run ended in a rig error; empty when it finished.
	Err string `json:"error,omitempty"`
}

// Study is every sweep the study ran.
type Study struct {
	Sweeps  []Sweep  `json:"sweeps"`
	WallS   float64  `json:"wall_s"`
	Workers int      `json:"workers"`
	Sets    []string `json:"sets,omitempty"`
}

// Find returns recipe n's sweep on mix m.
func (s Study) Find(n int, m Mix) (Sweep, bool) {
	for _, w := range s.Sweeps {
		if w.Recipe == n && w.Mix == m {
			return w, true
		}
	}
	return Sweep{}, false
}

// RunStudy sweeps every chosen recipe on every chosen mix on the virtual
// clock, Workers at a time, and returns the sweeps in recipe and mix order.
// A sweep that ends in a rig error is kept with its error; RunStudy fails
// only when a run file cannot be read or ctx ends.
func RunStudy(ctx context.Context, o StudyOptions) (Study, error) {
	start := time.Now()
	if o.Published.Version == 0 {
		f, err := Load(filepath.Join(o.Dir, "published.yaml"))
		if err != nil {
			return Study{}, err
		}
		o.Published = f
	}
	if o.Output == "" {
		return Study{}, errors.New("fidelity study: give an output folder for the run directories")
	}
	mixes := o.Mixes
	if len(mixes) == 0 {
		mixes = Mixes()
	}
	type job struct {
		i   int
		cfg config.Run
		w   Sweep
	}
	var jobs []job
	for _, p := range o.Published.Recipes {
		if len(o.Recipes) > 0 && !slices.Contains(o.Recipes, p.Recipe) {
			continue
		}
		path := filepath.Join(o.Dir, p.RunFile)
		for _, m := range mixes {
			if len(o.Only) > 0 && !slices.Contains(o.Only, Key{p.Recipe, m}) {
				continue
			}
			ovs := append(m.overrides(), o.Sets...)
			cfg, err := config.LoadWith(path, ovs...)
			if err != nil {
				return Study{}, fmt.Errorf("fidelity study: recipe %d, %s mix: %w", p.Recipe, m, err)
			}
			cfg.TimeScale = config.Virtual
			cfg.Output = filepath.Join(o.Output, fmt.Sprintf("%d-%s-%s", p.Recipe, p.Name, m))
			cfg.Notify, cfg.Deploy, cfg.Report = config.Notify{}, config.Deploy{}, config.Report{}
			if err := cfg.Validate(); err != nil {
				return Study{}, fmt.Errorf("fidelity study: recipe %d, %s mix: %w", p.Recipe, m, err)
			}
			jobs = append(jobs, job{i: len(jobs), cfg: cfg, w: Sweep{Recipe: p.Recipe, Mix: m, File: p.RunFile}})
		}
	}
	workers := o.Workers
	if workers < 1 {
		workers = 2
	}
	out := make([]Sweep, len(jobs))
	var mu sync.Mutex // guards o.Progress
	_ = rig.Parallel(ctx, len(jobs), workers, func(ctx context.Context, i int) error {
		j := jobs[i]
		t := time.Now()
		w := j.w
		sum, err := rig.Run(ctx, rig.Options{Config: j.cfg})
		w.Summary, w.WallS = sum, time.Since(t).Seconds()
		if err != nil {
			w.Err = err.Error()
		}
		if sum.RunDir != "" {
			w.KVPeak, w.StepKV = kvUse(sum.RunDir, sum)
		}
		out[j.i] = w
		if o.Progress != nil {
			mu.Lock()
			fmt.Fprintf(o.Progress, "recipe %d %-5s %-48s %5.1f s\n", w.Recipe, w.Mix, capacityWords(w), w.WallS)
			mu.Unlock()
		}
		return nil // a failed sweep is a row of the table, not the end of the study
	})
	if err := ctx.Err(); err != nil {
		return Study{}, err
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Recipe != out[b].Recipe {
			return out[a].Recipe < out[b].Recipe
		}
		return mixOrder(out[a].Mix) < mixOrder(out[b].Mix)
	})
	s := Study{Sweeps: out, WallS: time.Since(start).Seconds(), Workers: workers}
	for _, ov := range o.Sets {
		s.Sets = append(s.Sets, ov.Path+"="+ov.Value)
	}
	return s, nil
}

// KVUse is the KV cache's use over one step's judged time.
type KVUse struct {
	Sessions int     `json:"sessions"`
	Peak     float64 `json:"peak"`
	Mean     float64 `json:"mean"`
}

// kvUse reads the KV gauge of every scrape of the run directory: its peak
// over the run (nil when no scrape read one) and its peak and mean over
// each step's judged time.
func kvUse(dir string, sum report.Summary) (*float64, []KVUse) {
	d, err := report.OpenDir(dir)
	if err != nil {
		return nil, nil
	}
	r, err := report.LoadRun(d)
	if err != nil {
		return nil, nil
	}
	var peak *float64
	for _, p := range r.Series {
		if p.KVCacheUsage != nil && (peak == nil || *p.KVCacheUsage > *peak) {
			v := *p.KVCacheUsage
			peak = &v
		}
	}
	if peak == nil {
		return nil, nil
	}
	var steps []KVUse
	for _, st := range sum.Steps {
		u, n := KVUse{Sessions: st.Sessions}, 0
		for _, p := range r.Series {
			if p.KVCacheUsage == nil || p.AtS < st.MeasureStartS || p.AtS > st.EndS {
				continue
			}
			u.Peak = math.Max(u.Peak, *p.KVCacheUsage)
			u.Mean += *p.KVCacheUsage
			n++
		}
		if n > 0 {
			u.Mean /= float64(n)
			steps = append(steps, u)
		}
	}
	return peak, steps
}

func mixOrder(m Mix) int {
	for i, x := range Mixes() {
		if x == m {
			return i
		}
	}
	return len(Mixes())
}
