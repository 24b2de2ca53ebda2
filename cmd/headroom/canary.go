package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/headroom-bench/headroom/internal/canary"
	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/deploy"
	"github.com/headroom-bench/headroom/internal/record"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/transport"
	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

func canaryCmd(stdout, stderr io.Writer) *cobra.Command {
	return canaryCmdWith(stdout, stderr, deploy.New)
}

func canaryCmdWith(stdout, stderr io.Writer, newDep newDeployer) *cobra.Command {
	var (
		file, outDir string
		exitWhenDone bool
	)
	cmd := &cobra.Command{
		Use:   "canary -f FILE",
		Short: "Send a share of live sessions to the candidate recipe beside today's, judge both on the bar, and raise the share in steps",
		Long: `canary puts a recording proxy in front of two served recipes: today's (the
baseline, canary.baseline in the run file) and the candidate (the run file's
recipe). Point the agents at canary.listen. A share of new sessions
(canary.shares, raised in steps) goes to the candidate; every later request
of a session goes where its first went, so a conversation stays on the copy
that holds its cache, and a stream in flight finishes where it started.

Both sides are judged window by window (sweep.window_s) on bar, from their
own /metrics (canary.baseline.metrics, recipe.metrics), with the statistics
of a recipe run, and the candidate is compared with the baseline on the same
windows: "no worse than today" is a verdict of its own, with its interval.

  - a clear miss on the candidate (sweep.kill's rule on its last window, or
    a confident fail of the bar or of no worse than today) sends every
    session back to the baseline at once: the canary failed;
  - no data or too close holds the share;
  - a candidate that passes both with confidence for canary.hold_s is raised
    to the next share, and after the last it is ready: reported, or promoted
    as headroom promote does when canary.promote is on_ready.

Both sides' sessions are recorded as headroom record does (baseline.jsonl.gz,
candidate.jsonl.gz), and canary.json and canary.md (share steps, both sides'
figures over time) are written in a directory under output. After the
decision the proxy keeps routing (at share 0 after a failure) until Ctrl-C,
or stops at once with --exit-when-done.

With canary.split.type httproute the gateway splits instead: the canary
sets the weights of two backendRefs of one rule of a Gateway API HTTPRoute
(canary.split.httproute) at each share step, sets the candidate's to 0 on a
clear miss, and at the end puts back the weights it found (failed,
undecided, stopped) or leaves the last share's (ready). The rule must have
sessionPersistence, so sessions stay whole; nothing is proxied or recorded.

Exit status: 0 ready (or promoted), 1 failed or an error, 2 undecided or
stopped before the decision.`,
		Example: `  headroom canary -f canary.yaml
  OPENAI_BASE_URL=http://127.0.0.1:8001/v1 my-agent ...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("canary: give the run file with -f (its canary section names today's recipe)")
			}
			cfg, err := config.Load(file)
			if err != nil {
				return err
			}
			if cfg.Canary == nil {
				return fmt.Errorf("canary: %s has no canary section: add canary.baseline (today's endpoint and metrics), canary.shares and canary.hold_s (docs/canary.md)", file)
			}
			return runCanary(cmd.Context(), cfg, outDir, exitWhenDone, stdout, stderr, newDep)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&file, "file", "f", "", "the run `FILE` (its recipe is the candidate, canary.baseline today's)")
	fs.StringVarP(&outDir, "output", "o", "", "`DIR` for the recordings and canary.json/canary.md; default <output>/<recipe>/canary-<time>")
	fs.BoolVar(&exitWhenDone, "exit-when-done", false, "stop proxying once the canary is decided (the agents must then go elsewhere)")
	return cmd
}

// canaryPlan turns the run file into the canary's plan.
func canaryPlan(cfg config.Run) canary.Plan {
	c := cfg.Canary
	opts := rig.VerdictOptions(cfg)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	return canary.Plan{
		Shares: c.Shares, Hold: sec(c.HoldS), MaxHold: sec(c.MaxHoldS),
		Window: sec(cfg.Sweep.WindowS), Scrape: sec(cfg.Sweep.ScrapeS),
		Bar: rig.BarOf(cfg.Bar), Options: opts,
		Kill:    canary.Kill(cfg.Sweep.Kill),
		NoWorse: canary.NoWorse{Tolerance: c.NoWorse.Tolerance, ErrorPoints: c.NoWorse.ErrorPoints},
	}
}

// canarySide is one side's recording proxy and scraper.
type canarySide struct {
	rec  *record.Recorder
	file *record.File
}

func openSide(name, endpoint, dir string, logf func(string, ...any)) (*canarySide, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("canary: %s endpoint: %w", name, err)
	}
	f, err := record.CreateFile(filepath.Join(dir, name+".jsonl.gz"), false)
	if err != nil {
		return nil, fmt.Errorf("canary: %s recording: %w", name, err)
	}
	rec, err := record.New(record.Options{Upstream: u, Transport: canary.MarkUnreached(record.DefaultTransport()), Out: f, Gzip: true, Log: logf})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("canary: %s: %w", name, err)
	}
	return &canarySide{rec: rec, file: f}, nil
}

func (s *canarySide) close(ctx context.Context) error {
	return errors.Join(s.rec.Close(ctx), s.file.Close())
}

func runCanary(ctx context.Context, cfg config.Run, outDir string, exitWhenDone bool, stdout, stderr io.Writer, newDep newDeployer) error {
	c := cfg.Canary
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	mapping, err := rig.Mapping(cfg.Recipe)
	if err != nil {
		return err
	}
	metrics := transport.Conn{}
	if a := cfg.Recipe.MetricsAuth; a != nil {
		if metrics, err = a.Resolve("recipe.metrics_auth", nil, cfg.Recipe.Dir); err != nil {
			return err
		}
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	if outDir == "" {
		outDir = filepath.Join(cfg.Output, cfg.Recipe.Name, "canary-"+stamp)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	scraper := func(urls []string) *signal.Scraper {
		return &signal.Scraper{Targets: urls, Mapping: mapping, Client: metrics.Client(10 * time.Second)}
	}
	scrapers := [2]canary.Scraper{scraper(c.Baseline.Metrics), scraper(cfg.Recipe.Metrics)}
	progress := func(t canary.Tick) {
		logf("canary: %5.0fs share %g%%: baseline %s, candidate %s, no worse than today %s: %s: %s",
			t.At, 100*t.Share, t.Baseline.Verdict, t.Candidate.Verdict, t.NoWorse.Verdict, t.Decision, t.Why)
	}
	if c.Split.Type == config.CanarySplitHTTPRoute {
		split, err := routeSplit(cfg)
		if err != nil {
			return err
		}
		clock, _ := timescale.New(1)
		logf("canary: splitting through %s; baseline %s, candidate %s (%s); shares %v, %gs each; writing to %s",
			split, c.Baseline.Endpoint, cfg.Recipe.Endpoint, cfg.Recipe.Name, c.Shares, c.HoldS, outDir)
		ctl := &canary.Controller{Plan: canaryPlan(cfg), Clock: clock, Split: split, Scrapers: scrapers, Log: logf, OnTick: progress}
		res, err := ctl.Run(ctx)
		if err != nil {
			return err
		}
		return reportCanary(ctx, cfg, res, outDir, stamp, stdout, stderr, newDep)
	}
	base, err := openSide("baseline", c.Baseline.Endpoint, outDir, logf)
	if err != nil {
		return err
	}
	cand, err := openSide("candidate", cfg.Recipe.Endpoint, outDir, logf)
	if err != nil {
		_ = base.close(context.Background())
		return err
	}
	clock, _ := timescale.New(1)
	router, err := canary.NewRouter(canary.RouterOptions{Clock: clock, Baseline: base.rec.Handler(), Candidate: cand.rec.Handler(),
		Sessions: canary.Sessions{Header: c.SessionHeader, PrefixBytes: c.SessionPrefixBytes}, Idle: time.Duration(c.IdleS * float64(time.Second))})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		_ = errors.Join(base.close(context.Background()), cand.close(context.Background()))
		return fmt.Errorf("canary.listen %s: %v; pick a free address", c.Listen, err)
	}
	srv := &http.Server{Handler: router, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		// streams in flight finish, then both recordings are written
		grace, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(grace)
		if err := errors.Join(base.close(grace), cand.close(grace)); err != nil {
			logf("canary: %v", err)
		}
	}()
	logf("canary: agents at http://%s; baseline %s, candidate %s (%s); shares %v, %gs each; writing to %s",
		ln.Addr(), c.Baseline.Endpoint, cfg.Recipe.Endpoint, cfg.Recipe.Name, c.Shares, c.HoldS, outDir)
	ctl := &canary.Controller{Plan: canaryPlan(cfg), Clock: clock, Router: router, Scrapers: scrapers, Log: logf, OnTick: progress}
	res, err := ctl.Run(ctx)
	if err != nil {
		return err
	}
	outcome := reportCanary(ctx, cfg, res, outDir, stamp, stdout, stderr, newDep)
	var ee exitError
	if outcome != nil && !errors.As(outcome, &ee) {
		return outcome
	}
	if exitWhenDone || ctx.Err() != nil {
		return outcome
	}
	logf("canary: decided; still routing at share %g%% until Ctrl-C", 100*router.Share())
	select {
	case <-ctx.Done():
	case err := <-served:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("canary.listen %s: %v", c.Listen, err)
		}
	}
	return outcome
}

// reportCanary writes a decided canary's report, says its outcome and acts
// on it (afterCanary).
func reportCanary(ctx context.Context, cfg config.Run, res canary.Result, outDir, stamp string, stdout, stderr io.Writer, newDep newDeployer) error {
	if err := res.Write(outDir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: canary %s: %s\n", cfg.Recipe.Name, res.Outcome, res.Reason)
	fmt.Fprintf(stdout, "%s: share steps and both sides' figures in %s\n", cfg.Recipe.Name, filepath.Join(outDir, "canary.md"))
	return afterCanary(ctx, cfg, res, "canary-"+stamp, stdout, stderr, newDep)
}

// routeSplit connects to the API server that holds canary.split.httproute:
// its kubeconfig and context, else $KUBECONFIG, ~/.kube/config or the
// in-cluster service account, as kubectl does. Nothing is sent until the
// split begins.
func routeSplit(cfg config.Run) (*canary.HTTPRouteSplit, error) {
	h := cfg.Canary.Split.HTTPRoute
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if h.Kubeconfig != "" {
		rules.ExplicitPath = cfg.Recipe.Path(h.Kubeconfig)
	}
	kc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: h.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("canary.split.httproute: kubernetes client config: %v; set canary.split.httproute.kubeconfig or $KUBECONFIG, or run in a pod with a service account", err)
	}
	kc.UserAgent = "headroom-canary"
	if kc.Timeout == 0 {
		kc.Timeout = 30 * time.Second // a hung API server must not hang a rollback
	}
	cs, err := gwclient.NewForConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("canary.split.httproute: %v", err)
	}
	return &canary.HTTPRouteSplit{Routes: cs.GatewayV1().HTTPRoutes(h.Namespace), Namespace: h.Namespace, Name: h.Name, Rule: h.Rule,
		Baseline: h.Baseline, Candidate: h.Candidate, SessionHeader: cfg.Canary.SessionHeader}, nil
}

// afterCanary acts on a decided canary: a ready candidate is promoted
// through headroom promote's path when canary.promote is on_ready. It
// returns the command's exit status (nil: 0) or the promotion's error.
func afterCanary(ctx context.Context, cfg config.Run, res canary.Result, id string, stdout, stderr io.Writer, newDep newDeployer) error {
	switch res.Outcome {
	case canary.Ready:
		if cfg.Canary.Promote != config.CanaryPromoteOnReady {
			return nil
		}
		p := rig.Promotion{Promote: true, RunID: cfg.Recipe.Name + "/" + id, Reason: res.Reason}
		return promoteRun(ctx, cfg, p, stdout, stderr, newDep)
	case canary.Failed:
		return exitError{code: 1}
	}
	return exitError{code: 2}
}
