package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/trace"
	"github.com/headroom-bench/headroom/internal/verdict"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

func runCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		file    string
		asJSON  bool
		output  string
		quiet   bool
		printIt bool
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Sweep a recipe: step concurrent sessions up until one misses the bar, report capacity and cost",
		Long: `run replays agent sessions in closed-loop lanes against the recipe's endpoint,
one lane per concurrent session, and steps the sessions up the ladder. Each
step is judged only from the server's /metrics over its judged time. The sweep
stops at the first step that fails (or reads no data), waits for the engine to
be idle, and reports capacity with a 95% interval and cost per session-hour.

Without -f it runs the built-in default: the simulated gateway in-process on a
loopback port, a synthesised half-heavy, half-light AgentX-like mix and the
reference report's bar, on a clock 100 times faster than modelled time.

Everything is written to runs/<recipe>/<timestamp>/ as the run goes: the
resolved config, records.jsonl (one line per request), metrics.jsonl (every
scrape), steps.jsonl, summary.json and report.md.`,
		Example: `  headroom run
  headroom run --json | jq .capacity
  headroom run -f examples/run.yaml
  headroom run --print-config > my-run.yaml   # start a run file from the default`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Default()
			if file != "" {
				var err error
				if cfg, err = config.Load(file); err != nil {
					return err
				}
			}
			if output != "" {
				cfg.Output = output
			}
			if printIt {
				b, err := yaml.Marshal(cfg)
				if err != nil {
					return err
				}
				_, err = stdout.Write(b)
				return err
			}
			progress := stderr
			if quiet {
				progress = io.Discard
			}
			sum, err := runSweep(cmd.Context(), cfg, progress)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(sum)
			}
			return report.WriteText(stdout, sum)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "run file (YAML); default: the built-in simulated run")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().StringVar(&output, "output", "", "folder for run directories (default: the run file's output, runs)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	cmd.Flags().BoolVar(&printIt, "print-config", false, "print the resolved run file and exit without sending load")
	return cmd
}

// runSweep wires one run together: endpoint (or the simulator), traffic,
// load, metrics, sweep, and the run directory.
func runSweep(ctx context.Context, cfg config.Run, progress io.Writer) (report.Summary, error) {
	started := time.Now()
	clock, err := timescale.New(cfg.TimeScale)
	if err != nil {
		return report.Summary{}, err
	}
	endpoint, metrics := cfg.Recipe.Endpoint, cfg.Recipe.Metrics
	if endpoint == config.SimEndpoint {
		s, err := sim.New(sim.Options{Profile: sim.DefaultProfile(), Scale: cfg.TimeScale, Seed: cfg.Workload.Seed})
		if err != nil {
			return report.Summary{}, err
		}
		url, err := s.Start("127.0.0.1:0")
		if err != nil {
			return report.Summary{}, fmt.Errorf("start the simulated gateway: %w", err)
		}
		defer s.Close()
		endpoint, metrics = url, []string{url + "/metrics"}
		fmt.Fprintf(progress, "simulated gateway at %s (time scale %g)\n", url, cfg.TimeScale)
	}

	sessions, err := buildSessions(cfg.Workload)
	if err != nil {
		return report.Summary{}, err
	}
	dir, err := report.NewDir(cfg.Output, cfg.Recipe.Name, started)
	if err != nil {
		return report.Summary{}, err
	}
	fmt.Fprintf(progress, "run directory %s\n", dir.Path())
	resolved, _ := yaml.Marshal(cfg)
	if err := dir.WriteFile("config.yaml", resolved); err != nil {
		return report.Summary{}, err
	}
	records, err := dir.Append("records.jsonl")
	if err != nil {
		return report.Summary{}, err
	}
	defer records.Close()
	samples, err := dir.Append("metrics.jsonl")
	if err != nil {
		return report.Summary{}, err
	}
	defer samples.Close()
	steps, err := dir.Append("steps.jsonl")
	if err != nil {
		return report.Summary{}, err
	}
	defer steps.Close()

	mapping, err := signal.MappingByName(cfg.Recipe.Mapping)
	if err != nil {
		return report.Summary{}, fmt.Errorf("recipe.mapping: %w", err)
	}
	if cfg.Recipe.MappingFile != "" {
		if mapping, err = signal.LoadMapping(cfg.Recipe.MappingFile, mapping); err != nil {
			return report.Summary{}, fmt.Errorf("recipe.mapping_file: %w", err)
		}
	}
	scraper := &signal.Scraper{Targets: metrics, Mapping: mapping, Client: &http.Client{Timeout: 10 * time.Second}}
	client := load.NewClient(endpoint, cfg.Recipe.Model)
	defer client.Close()
	if err := preflight(ctx, endpoint, cfg.Recipe.Model, scraper, clock); err != nil {
		return report.Summary{}, fmt.Errorf("pre-flight: %w", err)
	}

	// Placeholder words are not tokens for a real tokenizer: measure how many
	// tokens the server makes of one word, so served prompts hit the planned length.
	cal, err := prompt.Calibrate(prompt.Builder{Seed: cfg.Workload.Seed, BlockSize: prompt.DefaultBlockSize}, load.NewTokenizer(endpoint, cfg.Recipe.Model).Func(ctx))
	if err != nil {
		return report.Summary{}, fmt.Errorf("pre-flight: token calibration: %w", err)
	}
	if cal.Estimated {
		fmt.Fprintf(progress, "pre-flight: the server has no /tokenize; prompts assume %.2f tokens per placeholder word (an estimate)\n", cal.TokensPerWord)
	} else {
		fmt.Fprintf(progress, "pre-flight: %.3f tokens per placeholder word, measured on /tokenize\n", cal.TokensPerWord)
	}
	book := sweep.NewBook(func(r load.Record) { records.Write(r) })
	gen := load.NewGenerator(load.Options{
		Client: client, Clock: clock, Tiers: sessions,
		Mix:       []load.TierShare{{Tier: "heavy", Share: cfg.Workload.Mix.Heavy}, {Tier: "light", Share: cfg.Workload.Mix.Light}},
		Prompts:   prompt.Builder{Seed: cfg.Workload.Seed, BlockSize: prompt.DefaultBlockSize, TokensPerWord: cal.TokensPerWord},
		ThinkTime: cfg.Workload.ThinkTime, ThinkCap: seconds(cfg.Workload.ThinkTimeCapS),
		Timeout: seconds(cfg.Workload.RequestTimeoutS), PrimeTimeout: seconds(cfg.Workload.PrimeTimeoutS),
		Seed: cfg.Workload.Seed, Sink: book.Add,
	})
	opts := verdict.DefaultOptions()
	opts.Seed, opts.Resamples, opts.Block = cfg.Sweep.Seed, cfg.Sweep.Resamples, cfg.Sweep.BootstrapBlock
	runner := &sweep.Runner{
		Plan: sweep.Plan{
			Ladder: cfg.Sweep.Ladder, Warmup: seconds(cfg.Sweep.WarmupS), Step: seconds(cfg.Sweep.StepS),
			Window: seconds(cfg.Sweep.WindowS), Scrape: seconds(cfg.Sweep.ScrapeS), Drain: seconds(cfg.Sweep.DrainS),
			Bar:     verdict.Bar{TTFTP90: cfg.Bar.TTFTP90S, InteractivityP90: cfg.Bar.InteractivityP90TPS, ErrorRate: cfg.Bar.ErrorRate},
			Options: opts,
			Repeat:  cfg.Sweep.RepeatCrossing(),
			Kill:    sweep.Kill(cfg.Sweep.Kill),
			KVFull:  cfg.Sweep.KVFull,
		},
		Clock: clock, Load: gen, Source: scraper, Book: book, Progress: progress,
		OnSample: func(s signal.Sample) { samples.Write(s) },
		OnStep: func(s sweep.StepResult) {
			steps.Write(s)
			// a killed run keeps every finished step
			records.Flush()
			samples.Flush()
			steps.Flush()
		},
	}
	res, runErr := runner.Run(ctx)

	sum := report.Summary{
		Version: report.SummaryVersion,
		Recipe: report.Recipe{Name: cfg.Recipe.Name, Engine: cfg.Recipe.Engine, Nodes: cfg.Recipe.Nodes,
			GPUsPerNode: cfg.Recipe.GPUsPerNode, USDPerGPUHour: cfg.Recipe.USDPerGPUHour,
			Endpoint: cfg.Recipe.Endpoint, Model: cfg.Recipe.Model},
		Bar:         runner.Plan.Bar,
		Capacity:    res.Capacity,
		StopReason:  res.StopReason,
		PostFlight:  res.PostFlight,
		RunDir:      dir.Path(),
		Started:     started.UTC().Format(time.RFC3339),
		TimeScale:   cfg.TimeScale,
		Calibration: &cal,
		Versions:    map[string]string{"headroom": version, "go": runtime.Version(), "records": fmt.Sprint(load.RecordVersion), "summary": fmt.Sprint(report.SummaryVersion)},
	}
	var lastPass *sweep.StepResult
	for i, s := range res.Steps {
		sum.Steps = append(sum.Steps, report.StepOf(s))
		if s.Judged.Verdict == verdict.Pass {
			lastPass = &res.Steps[i]
		}
	}
	var tokens sweep.Tokens
	fromStep := 0
	if lastPass != nil {
		tokens, fromStep = lastPass.Tokens, lastPass.Sessions
	}
	sum.Cost = sweep.CostOf(cfg.Recipe.Nodes, cfg.Recipe.GPUsPerNode, cfg.Recipe.USDPerGPUHour, res.Capacity, tokens, fromStep)
	if cfg.Sweep.Target > 0 {
		t := res.Capacity.Target(cfg.Sweep.Target)
		sum.Target = &t
	}
	sum.Collect(res.Warnings)
	sum.WallS = time.Since(started).Seconds()
	if err := dir.WriteJSON("summary.json", sum); err != nil {
		return sum, err
	}
	if err := dir.WriteFile("report.md", report.Markdown(sum)); err != nil {
		return sum, err
	}
	if runErr != nil {
		return sum, fmt.Errorf("the run did not finish: %v; what finished is in %s", runErr, dir.Path())
	}
	return sum, nil
}

// buildSessions loads or synthesises traces and splits them into tiers.
func buildSessions(w config.Workload) (map[string][]load.Session, error) {
	var traces []trace.Trace
	if w.Traces == "synth" {
		traces = trace.Synthesize(trace.SynthOptions{Sessions: w.SynthSessions, Seed: w.Seed, HeavyShare: 0.5})
	} else {
		var err error
		if traces, err = trace.ReadPath(w.Traces); err != nil {
			return nil, err
		}
	}
	if len(traces) < 4 {
		return nil, fmt.Errorf("workload.traces: %d traces; at least 4 are needed to cut heavy and light quarters", len(traces))
	}
	heavy, light := trace.Tiers(traces)
	out := map[string][]load.Session{}
	for tier, ts := range map[string][]trace.Trace{"heavy": heavy, "light": light} {
		for _, t := range ts {
			out[tier] = append(out[tier], load.Session{ID: t.ID, Tier: tier, Turns: t.Turns()})
		}
	}
	return out, nil
}

// preflight checks that the endpoint serves the model and its metrics answer
// before any load goes out.
func preflight(ctx context.Context, endpoint, model string, scraper *signal.Scraper, clock *timescale.Clock) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/v1/models", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("%s/v1/models: %w (is the endpoint up?)", endpoint, err)
	}
	defer resp.Body.Close()
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/v1/models answered HTTP %d", endpoint, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil {
		return fmt.Errorf("%s/v1/models: %w", endpoint, err)
	}
	var ids []string
	for _, m := range models.Data {
		if m.ID == model {
			ids = nil
			break
		}
		ids = append(ids, m.ID)
	}
	if ids != nil || len(models.Data) == 0 {
		return fmt.Errorf("the endpoint does not serve model %q (it lists: %s); fix recipe.model", model, strings.Join(ids, ", "))
	}
	if _, err := scraper.Scrape(ctx, clock.Now()); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
