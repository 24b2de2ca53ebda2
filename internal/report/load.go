package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// Run is what the renderings of one run directory are drawn from: the
// summary and the engine's gauges over time.
type Run struct {
	Summary Summary `json:"summary"`
	// Series is the engine's queue and KV cache over the run, one point per
	// scrape, from metrics.jsonl.
	Series []GaugePoint `json:"series"`
	// Partial is set when summary.json was missing and the summary was
	// rebuilt from steps.jsonl and config.yaml (a run that was killed).
	Partial bool `json:"partial,omitempty"`
	// Tiers is each step's load by tier from records.jsonl: requests in
	// flight per session; empty when the run directory has no records.
	Tiers []StepTiers `json:"tiers,omitempty"`
}

// GaugePoint is one scrape's gauges. A gauge the scrape lacked is null.
type GaugePoint struct {
	AtS          float64  `json:"at_s"` // modelled seconds since the run started
	Running      *float64 `json:"running"`
	Waiting      *float64 `json:"waiting"`
	KVCacheUsage *float64 `json:"kv_cache_usage"` // fraction 0..1
}

// runConfig is the part of config.yaml a rendering falls back on.
type runConfig struct {
	Recipe   Recipe `json:"recipe"`
	Workload struct {
		Mix *Mix `json:"mix"`
	} `json:"workload"`
	Bar struct {
		TTFTP90S            float64 `json:"ttft_p90_s"`
		InteractivityP90TPS float64 `json:"interactivity_p90_tps"`
		ErrorRate           float64 `json:"error_rate"`
	} `json:"bar"`
	Sweep struct {
		Target int `json:"target"`
	} `json:"sweep"`
	TimeScale float64 `json:"time_scale"`
}

// LoadRun reads a run directory for rendering: summary.json (or, when a run
// was killed before writing it, a summary rebuilt from steps.jsonl), the
// gauges of metrics.jsonl, and the mix from config.yaml when the summary
// does not carry it.
func LoadRun(d *Dir) (Run, error) {
	var r Run
	// the gauges' series is read from metrics.jsonl alone, the largest
	// file: beside the rest
	type gauges struct {
		series []GaugePoint
		err    error
	}
	gc := make(chan gauges, 1)
	go func() {
		g, err := readGauges(d)
		gc <- gauges{g, err}
	}()
	cfg, cfgErr := readConfig(d)
	steps, stepsErr := readSteps(d)

	b, err := os.ReadFile(d.File("summary.json"))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &r.Summary); err != nil {
			return r, fmt.Errorf("read %s: %w (the file is not a headroom summary; re-run `headroom judge` to rewrite it)", d.File("summary.json"), err)
		}
		r.Summary.upgrade()
	case errors.Is(err, fs.ErrNotExist):
		if stepsErr != nil {
			return r, fmt.Errorf("%s holds neither summary.json nor a readable steps.jsonl (%v): is it a run directory?", d.Path(), stepsErr)
		}
		if cfgErr != nil {
			return r, fmt.Errorf("%s has no summary.json and its config.yaml is unreadable (%v): cannot rebuild the summary", d.Path(), cfgErr)
		}
		r.Summary, r.Partial = rebuild(d, cfg, steps), true
	default:
		return r, fmt.Errorf("read %s: %w", d.File("summary.json"), err)
	}

	// Summaries written before steps carried their start: take it from
	// steps.jsonl when the two line up.
	if stepsErr == nil && len(steps) == len(r.Summary.Steps) {
		for i := range r.Summary.Steps {
			if r.Summary.Steps[i].StartS == 0 && r.Summary.Steps[i].Sessions == steps[i].Sessions {
				r.Summary.Steps[i].StartS = steps[i].Start
			}
		}
	}
	if r.Summary.Mix == nil && cfgErr == nil && cfg.Workload.Mix != nil {
		m := *cfg.Workload.Mix
		r.Summary.Mix = &m
	}

	r.Tiers, err = readTiers(d, r.Summary.Steps)
	g := <-gc
	if g.err != nil {
		return r, g.err
	}
	r.Series = g.series
	return r, err
}

// loadSummary is LoadRun without the time series, for comparisons.
func loadSummary(d *Dir) (Summary, error) {
	b, err := os.ReadFile(d.File("summary.json"))
	if errors.Is(err, fs.ErrNotExist) {
		r, err := LoadRun(d)
		return r.Summary, err
	}
	if err != nil {
		return Summary{}, fmt.Errorf("read %s: %w", d.File("summary.json"), err)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read %s: %w (the file is not a headroom summary)", d.File("summary.json"), err)
	}
	s.upgrade()
	if s.Mix == nil {
		if cfg, err := readConfig(d); err == nil && cfg.Workload.Mix != nil {
			m := *cfg.Workload.Mix
			s.Mix = &m
		}
	}
	if s.RunDir == "" {
		s.RunDir = d.Path()
	}
	return s, nil
}

func readConfig(d *Dir) (runConfig, error) {
	var c runConfig
	b, err := os.ReadFile(d.File("config.yaml"))
	if err != nil {
		return c, err
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("read %s: %w", d.File("config.yaml"), err)
	}
	return c, nil
}

func readSteps(d *Dir) ([]sweep.StepResult, error) {
	f, err := os.Open(d.File("steps.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []sweep.StepResult
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var s sweep.StepResult
		err := dec.Decode(&s)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			// a killed run may leave a torn last line: keep what came before it
			if len(out) > 0 {
				return out, nil
			}
			return nil, fmt.Errorf("read %s: %w", d.File("steps.jsonl"), err)
		}
		out = append(out, s)
	}
}

// rebuild makes a summary from the steps a killed run left behind.
func rebuild(d *Dir, cfg runConfig, steps []sweep.StepResult) Summary {
	s := Summary{Version: SummaryVersion, Recipe: cfg.Recipe, RunDir: d.Path(), TimeScale: cfg.TimeScale}
	s.Bar.TTFTP90, s.Bar.InteractivityP90, s.Bar.ErrorRate = cfg.Bar.TTFTP90S, cfg.Bar.InteractivityP90TPS, cfg.Bar.ErrorRate
	for _, st := range steps {
		s.Steps = append(s.Steps, StepOf(st))
	}
	// the latest judgement of each level, as the run itself reads them
	s.Capacity = sweep.CapacityOf(sweep.Points(steps))
	if cfg.Sweep.Target > 0 {
		t := sweep.TargetOf(steps, s.Capacity, cfg.Sweep.Target)
		s.Target = &t
	}
	s.Cost = sweep.Cost{USDPerHour: float64(cfg.Recipe.Nodes*cfg.Recipe.GPUsPerNode) * cfg.Recipe.USDPerGPUHour}
	if m := cfg.Workload.Mix; m != nil {
		mm := *m
		s.Mix = &mm
	}
	s.Collect([]string{"summary.json is missing (the run did not finish): this report is rebuilt from steps.jsonl, without cost per session-hour or post-flight"})
	s.StopReason = "the run ended before writing its summary"
	return s
}

// sampleGauges is the part of a signal.Sample a report reads.
type sampleGauges struct {
	At    time.Duration      `json:"at"`
	Gauge map[string]float64 `json:"gauge"`
}

func readGauges(d *Dir) ([]GaugePoint, error) {
	f, err := os.Open(d.File("metrics.jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []GaugePoint
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	for {
		var s sampleGauges
		err := dec.Decode(&s)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			if len(out) > 0 { // torn last line of a killed run
				return out, nil
			}
			return nil, fmt.Errorf("read %s: %w", d.File("metrics.jsonl"), err)
		}
		p := GaugePoint{AtS: s.At.Seconds()}
		p.Running = gauge(s.Gauge, signal.Running)
		p.Waiting = gauge(s.Gauge, signal.Waiting)
		p.KVCacheUsage = gauge(s.Gauge, signal.KVCacheUsage)
		out = append(out, p)
	}
}

func gauge(m map[string]float64, name string) *float64 {
	v, ok := m[name]
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
