package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/live"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/telemetry"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

const exitCodesHelp = `Exit codes:
  0  the target held (with no target set: the run finished)
  1  rig error: bad run file, endpoint down, a phase failed (mini evals that
     failed with evals.stop_on_fail: true included), the engine not idle
     after the run (post-flight), interrupted before any step was judged
  2  the target failed the bar, or a mini eval suite failed with confidence
     (the recipe is blocked; the sweep still measured its capacity)
  3  the target was too close to call, or had no data`

func runCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		rf      runFileFlags
		asJSON  bool
		output  string
		quiet   bool
		printIt bool
		verbose bool
		resume  string
		metrics string
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Sweep a recipe: step concurrent sessions up until one misses the bar, report capacity and cost",
		Long: `run replays agent sessions in closed-loop lanes against the recipe's endpoint,
one lane per concurrent session, and steps the sessions up the ladder. Each
step is judged only from the server's /metrics over its judged time. The sweep
stops at the first step that fails (or reads no data, or trips the kill
switch, or fills the KV cache), repeats the steps either side of the crossing,
waits for the engine to be idle, and reports capacity with a 95% interval and
cost per session-hour and per million tokens.

Phases, in order: pre-flight, mini evals, sweep, capacity, post-flight,
rollback. A failed phase ends the run with its reason.

Without -f and --endpoint it runs the built-in default: the simulated gateway,
a synthesised half-heavy, half-light AgentX-like mix and the reference
report's bar, on the virtual clock (seconds, the same numbers however busy
the host is); --time-scale 100 rehearses it over real HTTP on a loopback
port, on a wall clock 100 times faster than modelled time. A run without a
run file whose plan does not fit its GPU window has its steps cut, whole
windows at a time, until it does (a note says so; --step sets the length).
With --endpoint and no -f the recipe is named after the endpoint's host and
port, and states GPUs and a price only from --gpus and --usd-per-gpu-hour:
without them it reads "GPUs not stated" and "cost: not priced".

` + runFileFlagsHelp + `

Everything is written to runs/<recipe>/<timestamp>/ as the run goes: the
resolved config, records.jsonl (one line per request), metrics.jsonl (every
scrape), steps.jsonl, summary.json, report.md, report.html, report.json and
junit.xml. A killed run loses at most the step in flight; --resume continues it,
cutting off a line the kill left half-written and dropping the killed step's
records and scrapes, so that step runs again whole.
On SIGINT or SIGTERM the run stops issuing turns, cancels what is in flight,
runs post-flight and rollback, writes the partial report and exits with the
code of what it measured (1 when no step had been judged yet).

` + exitCodesHelp,
		Example: `  headroom run
  headroom run --json | jq .capacity
  headroom run -f examples/run.yaml
  headroom run --resume runs/recipe-0-vllm/20261129T093000Z
  headroom run --print-config > my-run.yaml   # start a run file from the default

` + runFileFlagsExample("run"),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := rf.load()
			if err != nil {
				return err
			}
			return runRecipe(cmd, stdout, stderr, cfg, runFlags{rf: rf, asJSON: asJSON, output: output, quiet: quiet, printIt: printIt, verbose: verbose, resume: resume, metrics: metrics})
		},
	}
	rf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().StringVar(&output, "output", "", "folder for run directories (default: the run file's output, runs)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every warning of every step, not each cause once")
	cmd.Flags().BoolVar(&printIt, "print-config", false, "print the resolved run file and exit without sending load")
	cmd.Flags().StringVar(&resume, "resume", "", "continue the run in this directory after its last finished step")
	cmd.Flags().StringVar(&metrics, "metrics-addr", "", "serve headroom's own /metrics (phase, step, sessions, in flight, running P90s, verdicts) on this address, e.g. :9464")
	return cmd
}

// runFlags are run's flags besides the run file's.
type runFlags struct {
	rf                              runFileFlags
	asJSON, quiet, printIt, verbose bool
	output, resume, metrics         string
}

// runRecipe carries out a run of cfg the way run's flags say: the body of
// run and simulate.
func runRecipe(cmd *cobra.Command, stdout, stderr io.Writer, cfg config.Run, f runFlags) error {
	rf, asJSON, output, quiet, printIt, resume, metrics := f.rf, f.asJSON, f.output, f.quiet, f.printIt, f.resume, f.metrics
	if output != "" {
		cfg.Output = output
	}
	if printIt {
		b, err := yaml.Marshal(cfg.Redacted()) // never a secret, even on the terminal
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	if k, ok, err := shardIndex(cfg, os.Getenv); err != nil {
		return err
	} else if ok {
		// a pod of a sharded run's Indexed Job other than the first: it
		// replays its lanes as the coordinator orders, and writes nothing
		return rig.RunShard(cmd.Context(), cfg.Sweep.Shard.Coordinator, k, stderr)
	}
	opts := rig.Options{Config: cfg, Progress: stderr, Version: fullVersion(), Live: live.IsTerminal(stderr, os.Getenv)}
	if quiet {
		opts.Progress = nil
	} else {
		for _, n := range rf.notes {
			fmt.Fprintln(stderr, "note:", n)
		}
	}
	if metrics != "" {
		tel := telemetry.New(cfg.Recipe.Name, fullVersion())
		addr, err := tel.Serve(cmd.Context(), metrics)
		if err != nil {
			return fmt.Errorf("--metrics-addr %s: %w", metrics, err)
		}
		fmt.Fprintf(stderr, "headroom's own metrics at http://%s/metrics\n", addr)
		opts.Telemetry = tel
	}
	if resume != "" {
		if rf.file != "" || rf.changes() {
			return errors.New("--resume takes the run file saved in the run directory; drop -f and the flags that change the run file (--endpoint, --set, ...)")
		}
		d, err := report.OpenDir(resume)
		if err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		opts.Resume = d
	}
	sum, err := rig.Run(cmd.Context(), opts)
	if sum.RunDir != "" {
		if rerr := renderAll(sum.RunDir); rerr != nil && err == nil {
			err = rerr
			sum.Error = rerr.Error()
		}
		// the finished directory, renderings included, to the bucket
		rig.UploadRun(cmd.Context(), cfg.Report.Upload, &sum, os.Getenv, stderr)
		// and the pull-request comment to the uploaded report
		if w := rig.LinkUploadedReport(cmd.Context(), cfg, sum.RunDir, os.LookupEnv); w != "" {
			fmt.Fprintln(stderr, w)
			sum.Warnings = append(sum.Warnings, w)
		}
	}
	// --json always prints a summary, with the error of a run that
	// ended in one; the text summary needs a run directory to show
	if asJSON || sum.RunDir != "" {
		if perr := printSummary(stdout, sum, asJSON, f.verbose); perr != nil && err == nil {
			err = perr
		}
	}
	code := rig.ExitCodeOf(sum, err)
	if err != nil && code != rig.ExitRigError {
		// interrupted after a verdict: say so, and exit with the
		// code of what it measured
		fmt.Fprintln(stderr, "headroom:", err)
		err = nil
	}
	if err != nil {
		return err
	}
	if code != rig.ExitHeld {
		return exitError{code: code}
	}
	return nil
}

// renderAll writes every rendering of a run directory.
func renderAll(dir string) error {
	d, err := report.OpenDir(dir)
	if err != nil {
		return err
	}
	return report.Render(d)
}

func printSummary(w io.Writer, sum report.Summary, asJSON, verbose bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	if verbose {
		return report.WriteTextAll(w, sum)
	}
	return report.WriteText(w, sum)
}

// loadRunFile reads a run file, or gives the built-in default run when file
// is empty.
func loadRunFile(file string) (config.Run, error) {
	if file == "" {
		return config.Default(), nil
	}
	return config.Load(file)
}

// runFileFlags pick the run file (-f FILE, or the built-in default) and
// the changes made on top of it; run and plan share them.
type runFileFlags struct {
	file       string
	endpoint   string
	model      string
	metrics    []string
	prometheus string
	selector   string
	apiKeyEnv  string
	sets       []string
	// the run's own flags: clock, hardware, price, ladder, target, step
	timeScale string
	gpus      int
	usd       float64
	sessions  string
	target    int
	step      string
	shards    int
	// notes say what load chose that no flag asked for (the clock of the
	// default run, a step cut to fit the window); run prints them
	notes []string
}

// runFileFlagsHelp is the help text for the run-file flags.
const runFileFlagsHelp = `A run needs no file: --endpoint URL --model M point the built-in default at a
real server (which also sets time_scale to 1 and drops recipe.sim), keeping
its bar, workload and sweep. Without -f and without --metrics or --prometheus,
the verdict reads ENDPOINT/metrics, where vLLM and SGLang serve it. --metrics
(repeatable) replaces recipe.metrics; --prometheus and --selector fill
recipe.prometheus; --api-key-env names the variable holding the endpoint's key.
--set path=value changes any field as the run file spells it (sweep.ladder,
sweep.ladder[2], recipe.headers.X-Team), after the flags above and on top of
-f FILE too; the value is YAML (3, [4,8,16]; a string field takes it as
written; "" or null removes a field). The result is checked exactly as a file
is, and each error names the flag that set the field or the file's line.`

// runFileFlagsExample is the help examples for the run-file flags of cmd.
func runFileFlagsExample(cmd string) string {
	return strings.NewReplacer("CMD", cmd).Replace(`  # a real server without a run file: the default's bar, workload and sweep
  headroom CMD --endpoint http://127.0.0.1:8000 --model glm-5.3
  # engines' metrics scraped directly, the key read from $GW_KEY
  headroom CMD --endpoint https://gw.example.com --model glm-5.3 --api-key-env GW_KEY \
    --metrics http://10.0.0.5:8000/metrics --metrics http://10.0.0.6:8000/metrics
  # metrics from Prometheus
  headroom CMD --endpoint http://vllm.llm:8000 --model glm-5.3 \
    --prometheus http://prometheus.monitoring:9090 --selector '{namespace="llm",job="vllm"}'
  # any field, as the run file spells it, also on top of -f
  headroom CMD -f examples/run.yaml --set sweep.ladder=[5,10,15,20] --set bar.ttft_p90_s=3 --set recipe.headers.X-Team=blue
  headroom CMD --set sweep.ladder=[4,8,16] --set sweep.stress=16   # the stress step must be on the ladder`)
}

// register adds the run-file flags to cmd.
func (f *runFileFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&f.file, "file", "f", "", "run `FILE` (YAML); default: the built-in simulated run")
	fs.StringVar(&f.endpoint, "endpoint", "", "the OpenAI-compatible base `URL` (recipe.endpoint); a real URL also sets time_scale 1 and drops recipe.sim; \"sim\" is the built-in simulator")
	fs.StringVar(&f.model, "model", "", "the model `ID` the endpoint serves (recipe.model)")
	fs.StringArrayVar(&f.metrics, "metrics", nil, "a /metrics `URL` the verdict reads (recipe.metrics), repeat for each engine and the gateway; default without -f: ENDPOINT/metrics")
	fs.StringVar(&f.prometheus, "prometheus", "", "read the engines' metrics from the Prometheus server at `URL` (recipe.prometheus.url)")
	fs.StringVar(&f.selector, "selector", "", "label `MATCHERS` that pick the recipe's series in Prometheus (recipe.prometheus.selector), e.g. '{namespace=\"llm\",job=\"vllm\"}'")
	fs.StringVar(&f.apiKeyEnv, "api-key-env", "", "the `NAME` of the environment variable holding the endpoint's API key (recipe.api_key_env); the key is never written")
	fs.StringVar(&f.timeScale, "time-scale", "", "the run's clock (time_scale): `virtual`, or modelled seconds per wall second (100 rehearses the built-in simulator over real HTTP on a wall clock); default without -f and --endpoint: virtual")
	fs.IntVar(&f.gpus, "gpus", 0, "the `N` GPUs the recipe runs on (recipe.nodes 1, recipe.gpus_per_node N); a flags-only run against a real endpoint reads \"GPUs not stated\" without it")
	fs.Float64Var(&f.usd, "usd-per-gpu-hour", 0, "the `PRICE` of one GPU-hour (recipe.usd_per_gpu_hour), with the GPUs it is per (--gpus, or the run file's); a flags-only run against a real endpoint is not priced without it")
	fs.StringVar(&f.sessions, "sessions", "", "the ladder of concurrent sessions, `N,N,...` (sweep.ladder), e.g. 4,8,12; a target or stress step not on it is dropped")
	fs.StringVar(&f.sessions, "ladder", "", "the same as --sessions")
	fs.IntVar(&f.target, "target", 0, "the `SESSIONS` step that must hold the bar (sweep.target); it must be on the ladder")
	fs.StringVar(&f.step, "step", "", "each step's judged `LENGTH` (sweep.step_s), e.g. 5m or 300; default without -f: the default's 900s, cut to fit the GPU window when the plan does not")
	fs.IntVar(&f.shards, "shards", 0, "split each step's lanes over `N` headroom processes (sweep.shards) on this machine's loopback, or, with sweep.shard.coordinator, pods of an Indexed Job; needs a wall clock (--time-scale 100 rehearses the simulator)")
	fs.StringArrayVar(&f.sets, "set", nil, "set a run-file field, `PATH=VALUE` with the path as the run file spells it, e.g. sweep.ladder=[4,8,16]; repeatable, applied last")
}

// changes reports whether any flag changes the run file.
func (f *runFileFlags) changes() bool {
	return f.endpoint != "" || f.model != "" || len(f.metrics) > 0 || f.prometheus != "" || f.selector != "" || f.apiKeyEnv != "" || len(f.sets) > 0 ||
		f.timeScale != "" || f.gpus != 0 || f.usd != 0 || f.sessions != "" || f.target != 0 || f.step != "" || f.shards != 0
}

// realEndpoint reports whether the flags point the run at a server other
// than the built-in simulator.
func (f *runFileFlags) realEndpoint() bool {
	return f.endpoint != "" && f.endpoint != config.SimEndpoint
}

// builtIn reports whether the run is the built-in default's simulator with
// no run file.
func (f *runFileFlags) builtIn() bool { return f.file == "" && !f.realEndpoint() }

// setsPath reports whether a --set names path (or a field under it).
func (f *runFileFlags) setsPath(path string) bool {
	for _, arg := range f.sets {
		if k, _, _ := strings.Cut(arg, "="); k == path || strings.HasPrefix(k, path+".") || strings.HasPrefix(k, path+"[") {
			return true
		}
	}
	return false
}

// recipeName names a flags-only run's recipe from its endpoint: host and
// port, with anything a directory name should not hold made a dash.
func recipeName(endpoint string) string {
	host := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		host = u.Host
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, host)
	for strings.Contains(name, "--") {
		name = strings.ReplaceAll(name, "--", "-")
	}
	if name = strings.Trim(name, "-."); name == "" {
		return "endpoint"
	}
	return name
}

// parseLadder reads --sessions: session counts separated by commas.
func parseLadder(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--sessions %q: give session counts separated by commas, e.g. 4,8,12", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseStep reads --step: a duration (5m, 90s) or a number of seconds.
func parseStep(s string) (float64, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 {
		return v, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--step %q: give a length such as 5m, 300s or 300", s)
	}
	return d.Seconds(), nil
}

// overrides are the flags' changes in the order they apply: the named
// flags, then each --set.
func (f *runFileFlags) overrides() ([]config.Override, error) {
	var ovs []config.Override
	add := func(flag, path, value string) {
		ovs = append(ovs, config.Override{Path: path, Value: value, Flag: flag})
	}
	metrics := f.metrics
	if f.endpoint != "" {
		add("--endpoint", "recipe.endpoint", f.endpoint)
		if f.endpoint != config.SimEndpoint {
			add("--endpoint", "time_scale", "1")
			add("--endpoint", "recipe.sim", "null")
			if f.file == "" && len(metrics) == 0 && f.prometheus == "" {
				// vLLM and SGLang serve /metrics beside the API
				add("--endpoint", "recipe.metrics", "[]")
				add("--endpoint", "recipe.metrics[0]", strings.TrimSuffix(f.endpoint, "/")+"/metrics")
			}
		}
	}
	if f.builtIn() && f.timeScale == "" {
		// no run file and no endpoint: the built-in simulator on the
		// virtual clock, the same run however busy the host is
		add("--time-scale", "time_scale", "virtual")
	}
	if f.timeScale != "" {
		add("--time-scale", "time_scale", f.timeScale)
	}
	if f.file == "" && f.realEndpoint() {
		// a flags-only run names its recipe after the server and states
		// no hardware or price that no flag gave: 0 GPUs reads "GPUs not
		// stated", and cost "not priced"
		add("--endpoint", "recipe.name", recipeName(f.endpoint))
		add("--endpoint", "recipe.nodes", "0")
		add("--endpoint", "recipe.gpus_per_node", "0")
		add("--endpoint", "recipe.usd_per_gpu_hour", "0")
	}
	if f.gpus != 0 {
		add("--gpus", "recipe.nodes", "1")
		add("--gpus", "recipe.gpus_per_node", strconv.Itoa(f.gpus))
	}
	if f.usd != 0 {
		add("--usd-per-gpu-hour", "recipe.usd_per_gpu_hour", strconv.FormatFloat(f.usd, 'g', -1, 64))
	}
	if f.sessions != "" {
		ladder, err := parseLadder(f.sessions)
		if err != nil {
			return nil, err
		}
		base, err := f.base()
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(ladder))
		for i, n := range ladder {
			parts[i] = strconv.Itoa(n)
		}
		add("--sessions", "sweep.ladder", "["+strings.Join(parts, ",")+"]")
		// a target or stress step the new ladder lacks is dropped
		if f.target == 0 && !slices.Contains(ladder, base.Sweep.Target) {
			add("--sessions", "sweep.target", "null")
		}
		if !slices.Contains(ladder, base.Sweep.Stress) {
			add("--sessions", "sweep.stress", "null")
		}
	}
	if f.target != 0 {
		add("--target", "sweep.target", strconv.Itoa(f.target))
	}
	if f.shards != 0 {
		add("--shards", "sweep.shards", strconv.Itoa(f.shards))
	}
	if f.step != "" {
		sec, err := parseStep(f.step)
		if err != nil {
			return nil, err
		}
		add("--step", "sweep.step_s", strconv.FormatFloat(sec, 'g', -1, 64))
	}
	if f.model != "" {
		add("--model", "recipe.model", f.model)
	}
	if len(metrics) > 0 {
		add("--metrics", "recipe.metrics", "[]")
		for i, m := range metrics {
			add("--metrics", fmt.Sprintf("recipe.metrics[%d]", i), m)
		}
	}
	if f.prometheus != "" {
		add("--prometheus", "recipe.prometheus.url", f.prometheus)
	}
	if f.selector != "" {
		add("--selector", "recipe.prometheus.selector", f.selector)
	}
	if f.apiKeyEnv != "" {
		add("--api-key-env", "recipe.api_key_env", f.apiKeyEnv)
	}
	for _, arg := range f.sets {
		o, err := config.ParseSet(arg)
		if err != nil {
			return nil, err
		}
		ovs = append(ovs, o)
	}
	return ovs, nil
}

// load reads the run file the flags name, or the built-in default, with
// the flags' changes on top.
func (f *runFileFlags) load() (config.Run, error) {
	ovs, err := f.overrides()
	if err != nil {
		return config.Run{}, err
	}
	f.notes = nil
	if f.file != "" {
		return config.LoadWith(f.file, ovs...)
	}
	cfg, err := config.DefaultWith(ovs...)
	if err != nil {
		return cfg, err
	}
	if f.builtIn() && f.timeScale == "" && cfg.TimeScale.Virtual() {
		f.notes = append(f.notes, "no run file and no endpoint: the built-in simulator on the virtual clock (deterministic, seconds of wall time); --time-scale 100 rehearses it over real HTTP on a wall clock")
	}
	if f.step == "" && !f.setsPath("sweep.step_s") {
		if cfg, err = fitStep(cfg, &f.notes); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// base is the run file (or the built-in default) before the flags' changes.
func (f *runFileFlags) base() (config.Run, error) {
	if f.file != "" {
		return config.Load(f.file)
	}
	return config.Default(), nil
}

// fitStep cuts the step of a run without a run file, whole windows at a
// time, until its plan's worst case fits the GPU window; a note says so.
// The default's steps are sized for a sweep alone, and a run file says its
// own.
func fitStep(cfg config.Run, notes *[]string) (config.Run, error) {
	p, err := rig.MakePlan(cfg)
	if err != nil || p.Fits {
		return cfg, err
	}
	was, sw := cfg.Sweep.StepS, cfg.Sweep.WindowS
	for cfg.Sweep.StepS-sw >= 5*sw {
		cfg.Sweep.StepS -= sw
		if p, err = rig.MakePlan(cfg); err != nil {
			return cfg, err
		}
		if p.Fits {
			if cfg.Sweep.MaxStepS == 2*was { // the default's: twice the step
				cfg.Sweep.MaxStepS = 2 * cfg.Sweep.StepS
			}
			*notes = append(*notes, fmt.Sprintf("steps of %.0fs judged, cut from %.0fs so the worst case (%.0f minutes) fits the %.0f-minute GPU window; --step sets it", cfg.Sweep.StepS, was, p.Minutes, p.WindowMin))
			return cfg, cfg.Validate()
		}
	}
	cfg.Sweep.StepS = was
	return cfg, nil
}
