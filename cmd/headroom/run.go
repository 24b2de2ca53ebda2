package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

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
  1  rig error: bad run file, endpoint down, a phase failed, the engine not
     idle after the run (post-flight), interrupted before any step was judged
  2  the target failed the bar
  3  the target was too close to call, or had no data`

func runCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		rf      runFileFlags
		asJSON  bool
		output  string
		quiet   bool
		printIt bool
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

Without -f it runs the built-in default: the simulated gateway in-process on a
loopback port, a synthesised half-heavy, half-light AgentX-like mix and the
reference report's bar, on a clock 100 times faster than modelled time.

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
			return runRecipe(cmd, stdout, stderr, cfg, runFlags{rf: rf, asJSON: asJSON, output: output, quiet: quiet, printIt: printIt, resume: resume, metrics: metrics})
		},
	}
	rf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().StringVar(&output, "output", "", "folder for run directories (default: the run file's output, runs)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	cmd.Flags().BoolVar(&printIt, "print-config", false, "print the resolved run file and exit without sending load")
	cmd.Flags().StringVar(&resume, "resume", "", "continue the run in this directory after its last finished step")
	cmd.Flags().StringVar(&metrics, "metrics-addr", "", "serve headroom's own /metrics (phase, step, sessions, in flight, running P90s, verdicts) on this address, e.g. :9464")
	return cmd
}

// runFlags are run's flags besides the run file's.
type runFlags struct {
	rf                      runFileFlags
	asJSON, quiet, printIt  bool
	output, resume, metrics string
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
	opts := rig.Options{Config: cfg, Progress: stderr, Version: fullVersion(), Live: live.IsTerminal(stderr, os.Getenv)}
	if quiet {
		opts.Progress = nil
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
	}
	// --json always prints a summary, with the error of a run that
	// ended in one; the text summary needs a run directory to show
	if asJSON || sum.RunDir != "" {
		if perr := printSummary(stdout, sum, asJSON); perr != nil && err == nil {
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

func printSummary(w io.Writer, sum report.Summary, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
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
	fs.StringArrayVar(&f.sets, "set", nil, "set a run-file field, `PATH=VALUE` with the path as the run file spells it, e.g. sweep.ladder=[4,8,16]; repeatable, applied last")
}

// changes reports whether any flag changes the run file.
func (f *runFileFlags) changes() bool {
	return f.endpoint != "" || f.model != "" || len(f.metrics) > 0 || f.prometheus != "" || f.selector != "" || f.apiKeyEnv != "" || len(f.sets) > 0
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
	if f.file != "" {
		return config.LoadWith(f.file, ovs...)
	}
	if len(ovs) == 0 {
		return config.Default(), nil
	}
	return config.DefaultWith(ovs...)
}
