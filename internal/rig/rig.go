// Package rig runs one recipe run through its phases: pre-flight, mini
// evals, sweep, capacity, post-flight and rollback, writing the run directory
// as it goes. It also re-judges and resumes saved runs.
package rig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/deploy"
	"github.com/headroom-bench/headroom/internal/discover"
	"github.com/headroom-bench/headroom/internal/live"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/telemetry"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/transport"
	"github.com/headroom-bench/headroom/internal/verdict"
	"sigs.k8s.io/yaml"
)

// Options configure one run.
type Options struct {
	Config config.Run
	// Progress receives a line per event for people watching; nil is quiet.
	Progress io.Writer
	// Resume continues the run in this directory after its last finished step.
	Resume *report.Dir
	// Version is headroom's version, written into the summary.
	Version string
	// Live redraws a status line on Progress, which must be a terminal.
	Live bool
	// Telemetry, if set, is headroom's own /metrics, kept current as the
	// run goes.
	Telemetry *telemetry.Telemetry
	// NewDir makes the run directory; nil is report.NewDir. Tests give one
	// that fills (report.Dir.FailAfter).
	NewDir func(root, recipe string, now time.Time) (*report.Dir, error)
	// StartShard starts the other shards of a sharded sweep on this
	// machine (sweep.shards without sweep.shard.coordinator); nil runs
	// this binary's `headroom shard` (ExecShard).
	StartShard ShardStarter
	// RepeatSameSessions makes repeats replay fresh plays of the sessions
	// the run first drew, not sessions synthesised from a fresh seed: the
	// coverage study's comparison of the two (issue 21.2); runs never set it.
	RepeatSameSessions bool
}

// Phase names, in the order they run.
const (
	PhaseRollout    = "rollout"
	PhasePreflight  = "pre-flight"
	PhaseEvals      = "mini evals"
	PhaseSweep      = "sweep"
	PhaseCapacity   = "capacity"
	PhasePostflight = "post-flight"
	PhaseRollback   = "rollback"
)

// Interrupted is returned when the run was stopped by a signal: the load was
// cancelled, post-flight and rollback ran, and the partial summary was written.
type Interrupted struct{ Dir string }

func (e *Interrupted) Error() string {
	return "interrupted: post-flight ran and the partial report is in " + e.Dir
}

// PhaseError is a phase that failed and ended the run.
type PhaseError struct {
	Phase string
	Err   error
}

func (e *PhaseError) Error() string { return e.Phase + ": " + e.Err.Error() }
func (e *PhaseError) Unwrap() error { return e.Err }

// Run carries out one recipe run. It always returns the summary of what was
// done, written to the run directory, even when it also returns an error.
func Run(ctx context.Context, o Options) (report.Summary, error) {
	r := &run{o: o, cfg: o.Config, progress: o.Progress, started: time.Now()}
	if r.progress == nil {
		r.progress = io.Discard
	}
	sum, err := r.do(ctx)
	if err != nil && sum.Version == 0 {
		// the run ended before its directory: still say what and why
		sum = Summarize(o.Config, sweep.Result{StopReason: err.Error()})
		sum.Target, sum.Stress = nil, nil
	}
	if err != nil {
		sum.Error = err.Error()
	}
	// what the caller prints, on every path, holds no secret the run
	// read, as the run directory does not
	red := r.redact
	if red == nil {
		red = new(transport.Redactor)
		red.AddURL(o.Config.Recipe.Endpoint)
		for _, m := range o.Config.Recipe.Metrics {
			red.AddURL(m)
		}
		if o.Config.Recipe.Prometheus != nil {
			red.AddURL(o.Config.Recipe.Prometheus.URL)
		}
		red.AddURL(o.Config.Notify.Webhook)
	}
	return redactSummary(red, sum), redactError(red, err)
}

type run struct {
	o        Options
	notify   *notifier
	statusMu sync.Mutex
	status   func() live.Status
	cfg      config.Run
	progress io.Writer
	started  time.Time
	phases   []report.Phase
	dir      *report.Dir
	// overContext is pre-flight's count of the planned turns over the
	// served context, for the summary; nil until counted.
	overContext *report.OverContext
	// contextLen is the served context pre-flight read (0: not known); the
	// shards trim their sessions by it as pre-flight did.
	contextLen int
	// snap is the resumed directory as it was, until the sweep starts
	snap *snapshot
	// redact is the run's redactor once its credentials are read
	redact *transport.Redactor
	// notes say what resuming mended in the run directory, for the summary;
	// savedSamples are the scrapes of the steps judged before the resume.
	notes        []string
	savedSamples []signal.Sample
	// blocked is why a mini eval suite that failed with confidence blocks
	// the recipe, when the run went on to measure capacity; empty if none.
	blocked string
}

func (r *run) logf(format string, args ...any) { fmt.Fprintf(r.progress, format+"\n", args...) }

func (r *run) setStatus(f func() live.Status) {
	r.statusMu.Lock()
	r.status = f
	r.statusMu.Unlock()
}

func (r *run) currentStatus() live.Status {
	r.statusMu.Lock()
	f := r.status
	r.statusMu.Unlock()
	return f()
}

// phase runs f as a named phase and records how it went.
func (r *run) phase(name string, f func() (string, error)) error {
	r.setStatus(func() live.Status { return live.Status{Phase: name} })
	r.o.Telemetry.SetPhase(name)
	start := time.Now()
	detail, err := f()
	p := report.Phase{Name: name, Status: "ok", TookS: time.Since(start).Seconds(), Detail: detail}
	if err != nil {
		p.Status, p.Detail = "failed", err.Error()
	}
	r.addPhase(p)
	if err != nil {
		r.logf("%s: FAILED: %v", name, err)
		var be *blockedError
		if errors.As(err, &be) {
			return nil // failed, and the run goes on: the summary carries the block
		}
		return &PhaseError{Phase: name, Err: err}
	}
	if detail != "" {
		r.logf("%s: %s", name, detail)
	}
	return nil
}

func (r *run) skip(name, why string) {
	r.addPhase(report.Phase{Name: name, Status: "skipped", Detail: why})
}

// addPhase records a phase and tells the webhook.
func (r *run) addPhase(p report.Phase) {
	r.phases = append(r.phases, p)
	r.notify.post(live.Message{Text: fmt.Sprintf("%s: %s %s: %s", r.cfg.Recipe.Name, p.Name, p.Status, p.Detail), Event: "phase",
		Fields: map[string]any{"recipe": r.cfg.Recipe.Name, "phase": p.Name, "status": p.Status, "detail": p.Detail, "took_s": p.TookS}})
}

func (r *run) do(ctx context.Context) (sum report.Summary, err error) {
	r.notify = startNotifier(r.cfg, os.LookupEnv)
	defer r.notify.close()
	r.setStatus(func() live.Status { return live.Status{Phase: PhasePreflight} })
	if r.o.Live && r.o.Progress != nil {
		view := live.StartView(r.o.Progress, time.Second, r.currentStatus)
		defer view.Stop()
		r.progress = view.Writer()
	}
	cfg, err := resolvePaths(r.cfg)
	if err != nil {
		return report.Summary{}, err
	}
	r.cfg = cfg
	var previous []sweep.StepResult
	offset := time.Duration(0)
	if r.o.Resume != nil {
		r.dir = r.o.Resume
		// a resume that fails before its sweep starts changes nothing on
		// disk: the directory is put back as it was (the sweep's start
		// lets the changes stand)
		if r.snap, err = takeSnapshot(r.dir); err != nil {
			return report.Summary{}, err
		}
		defer func() {
			if r.snap != nil {
				if rerr := r.snap.restore(); rerr != nil {
					err = errors.Join(err, fmt.Errorf("--resume failed and %s could not be put back as it was: %w", r.dir.Path(), rerr))
				}
			}
		}()
		saved, notes, err := readResume(r.dir)
		if err != nil {
			return report.Summary{}, err
		}
		cfg, previous, r.notes, r.savedSamples = saved.Config, saved.Steps, notes, saved.Samples
		for _, n := range notes {
			r.logf("resume: %s", n)
		}
		r.cfg = cfg
		if len(previous) > 0 {
			offset = time.Duration(previous[len(previous)-1].End*float64(time.Second)) + time.Minute
		}
		r.logf("resuming %s after %d finished steps", r.dir.Path(), len(previous))
	}
	clock, err := newClock(cfg.TimeScale, offset)
	if err != nil {
		return report.Summary{}, err
	}
	clock.Run(func() { sum, err = r.on(ctx, cfg, clock, previous) })
	return sum, err
}

// newClock is the run's clock, reading offset at its start (a resumed run
// continues the timeline of the run it resumes).
func newClock(s config.Scale, offset time.Duration) (*timescale.Clock, error) {
	if s.Virtual() {
		return timescale.NewVirtualAt(offset), nil
	}
	return timescale.NewAt(float64(s), offset)
}

// on carries out the run from its clock on: on a virtual clock every wait
// from here is in modelled time.
func (r *run) on(ctx context.Context, cfg config.Run, clock *timescale.Clock, previous []sweep.StepResult) (sum report.Summary, err error) {
	cfg = mainMix(cfg)
	// Credentials are read from the environment once, held in memory, and
	// redacted from everything the run writes or prints.
	acc, err := resolveAccess(cfg, nil)
	if err != nil {
		return report.Summary{}, err
	}
	r.redact = acc.redact
	r.progress = acc.redact.Writer(r.progress)
	r.notify.redacting(acc.redact)
	endpoint, metrics, rt, stopSim, err := EndpointOn(cfg, r.progress, clock)
	if err != nil {
		return report.Summary{}, err
	}
	if rt != nil {
		acc.endpoint.RoundTripper, acc.metrics.RoundTripper = rt, rt
	}
	defer stopSim()
	sessions, err := BuildSessions(cfg.Workload)
	if err != nil {
		return report.Summary{}, err
	}
	if r.dir == nil {
		newDir := r.o.NewDir
		if newDir == nil {
			newDir = report.NewDir
		}
		if r.dir, err = newDir(cfg.Output, cfg.Recipe.Name, r.started); err != nil {
			return report.Summary{}, err
		}
		r.dir.Redact(acc.redact)
		resolved, _ := yaml.Marshal(cfg.Redacted())
		if err := r.dir.WriteFile("config.yaml", resolved); err != nil {
			return report.Summary{}, err
		}
	}
	r.dir.Redact(acc.redact)
	r.logf("run directory %s", r.dir.Path())
	files, err := openFiles(r.dir)
	if err != nil {
		return report.Summary{}, err
	}
	defer files.close()
	if err := stampVersion(r.dir, r.o.Version); err != nil {
		return report.Summary{}, err
	}

	// Rollout, and rollback always: whatever happens from here on, the
	// previous recipe is put back before the run is over.
	dep, err := deploy.New(cfg.Recipe, deploy.Env{Stdout: r.progress, Stderr: r.progress, Environ: os.Environ(), Endpoint: endpoint, Log: r.progress,
		HTTP: acc.endpoint.Client(probeTimeout)})
	if err != nil {
		return report.Summary{}, fmt.Errorf("recipe.deploy: %w", err)
	}
	deployed := cfg.Recipe.Deploy.Type != "" && cfg.Recipe.Deploy.Type != recipe.DeployNone
	defer func() {
		// Promote keeps a candidate that held the target and was the
		// cheapest compared; anything else rolls back.
		judged := sum
		if err != nil {
			judged.Error = err.Error()
		}
		promo := DecidePromotion(cfg, judged)
		kept := false
		if deployed && promo.Promote {
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deploy.RollbackTimeout(cfg.Recipe))
			kept = r.phase(PhasePromote, func() (string, error) { return promo.Reason, deploy.Promote(pctx, dep, promo.RunID) }) == nil
			cancel()
		}
		if !deployed {
			r.skip(PhaseRollback, "nothing to roll back (deploy: none)")
		} else if kept {
			r.skip(PhaseRollback, "the candidate was promoted")
		} else {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deploy.RollbackTimeout(cfg.Recipe))
			defer cancel()
			detail := "the previous recipe is back and serving"
			if cfg.Deploy.PromoteOn() {
				detail += "; " + promo.Reason
			}
			rerr := r.phase(PhaseRollback, func() (string, error) {
				return detail, dep.Rollback(rctx)
			})
			if rerr != nil {
				r.logf("ROLLBACK FAILED: %v", rerr)
				r.o.Telemetry.RollbackFailed()
				sum.Warnings = append(sum.Warnings, "ROLLBACK FAILED: "+rerr.Error())
				err = errors.Join(err, rerr)
			}
		}
		sum.Warnings = append(sum.Warnings, r.notify.finish()...)
		sum.Phases = r.phases
		if err != nil {
			sum.Error = err.Error()
		}
		if sum.RunDir != "" {
			if werr := r.write(&sum); werr != nil && err == nil {
				err = werr
			}
		}
	}()
	if deployed {
		if derr := r.phase(PhaseRollout, func() (string, error) {
			if err := dep.Deploy(ctx); err != nil {
				return "", err
			}
			return "the recipe is up and serving", dep.Ready(ctx)
		}); derr != nil {
			for _, name := range []string{PhasePreflight, PhaseEvals, PhaseSweep, PhaseCapacity, PhasePostflight} {
				r.skip(name, "rollout failed")
			}
			sum = r.unswept(derr.Error(), nil)
			return sum, derr
		}
	}

	r.o.Telemetry.SetBar(telemetry.Bar{TTFTP90S: cfg.Bar.TTFTP90S, InteractivityP90TPS: cfg.Bar.InteractivityP90TPS, ErrorRate: cfg.Bar.ErrorRate})
	mapping, err := Mapping(cfg.Recipe)
	if err != nil {
		return report.Summary{}, err
	}
	src, err := newSource(cfg, metrics, mapping, acc, clock, discover.Connect)
	if err != nil {
		return report.Summary{}, err
	}
	client := load.NewClientConn(endpoint, cfg.Recipe.Model, acc.endpoint)
	defer client.Close()

	var cal prompt.Calibration
	perr := r.phase(PhasePreflight, func() (string, error) {
		// an engine still loading answers 503: wait for it, saying so
		if err := waitReady(ctx, acc.endpoint.Client(probeTimeout), endpoint, seconds(cfg.Sweep.ReadyTimeoutS), clock, r.progress); err != nil {
			return "", err
		}
		asked := cfg.Bar.ClientErrors
		detail, err := preflight(ctx, &cfg, endpoint, acc, src, clock)
		if err != nil {
			return "", err
		}
		if cfg.Bar.ClientErrors && !asked {
			if err := r.adoptClientErrors(cfg); err != nil {
				return "", err
			}
		}
		// Too many turns over the served context stop the run here;
		// workload.skip_over_context drops them before any lane starts.
		if detail, err = r.fitContext(ctx, cfg, endpoint, acc, &sessions, detail); err != nil {
			return "", err
		}
		// Placeholder words are not tokens for a real tokenizer: measure how
		// many tokens the server makes of one word, so served prompts hit
		// the planned length.
		cal, err = prompt.Calibrate(prompt.Builder{Seed: cfg.Workload.Seed, BlockSize: prompt.DefaultBlockSize}, load.NewTokenizerConn(endpoint, cfg.Recipe.Model, acc.endpoint).Func(ctx))
		if err != nil {
			return "", fmt.Errorf("token calibration: %w", err)
		}
		if cal.Estimated {
			detail += fmt.Sprintf("; no /tokenize: prompts assume %.2f tokens per placeholder word (an estimate)", cal.TokensPerWord)
		} else {
			detail += fmt.Sprintf("; %.3f tokens per placeholder word, measured on /tokenize", cal.TokensPerWord)
		}
		return detail, nil
	})
	if perr != nil {
		r.skip(PhaseEvals, "pre-flight failed")
		r.skip(PhaseSweep, "pre-flight failed")
		r.skip(PhaseCapacity, "pre-flight failed")
		r.skip(PhasePostflight, "no load was sent")
		sum = r.unswept(perr.Error(), &cal)
		return sum, perr
	}
	if len(cfg.Evals.Suites)+len(cfg.Evals.Custom) == 0 {
		r.skip(PhaseEvals, "no eval suites configured")
	} else {
		eerr := r.phase(PhaseEvals, func() (string, error) {
			suites, err := Suites(cfg.Evals)
			if err != nil {
				return "", err
			}
			rep := runEvals(ctx, cfg, suites, endpoint, acc.endpoint, clock)
			if werr := r.dir.WriteJSON("evals.json", rep); werr != nil {
				return "", werr
			}
			if rep.Blocked() {
				r.blocked = blockedBy(rep)
				if cfg.Evals.StopOnFail {
					return "", fmt.Errorf("%s, which blocks the recipe; evals.stop_on_fail ends the run here: %s", r.blocked, evalDetail(rep))
				}
				return "", &blockedError{why: r.blocked}
			}
			return evalDetail(rep), nil
		})
		// a block that lets the sweep go on is no error here
		if eerr != nil {
			for _, name := range []string{PhaseSweep, PhaseCapacity} {
				r.skip(name, "mini evals failed")
			}
			r.skip(PhasePostflight, "no load was sent")
			sum = r.unswept(eerr.Error(), &cal)
			return sum, eerr
		}
	}
	under, err := newUnderLoad(cfg, endpoint, acc.endpoint, clock)
	if err != nil {
		return report.Summary{}, err
	}
	if under != nil && r.blocked != "" {
		// the recipe is blocked on its correctness already: tool calls
		// under load would fail every step on what blocked it, and hide
		// the speed the sweep goes on to measure
		under = nil
		r.notes = append(r.notes, "evals under load were not sent: the mini evals before the sweep blocked the recipe already, so the steps are judged on speed and errors alone")
	}

	tel := r.o.Telemetry
	// the scrape loop calls OnSample from one goroutine at a time, in order;
	// on a virtual clock off the clock, so it must not wait on the clock
	var recent []signal.Sample
	book := sweep.NewBook(func(rec load.Record) {
		files.record(rec.Shard).Write(rec)
		tel.RequestDone(rec.Error)
	})
	onSend := func(rec load.Record) { book.Sent(rec); tel.RequestStarted() }
	var extra func(int) []verdict.Part
	if under != nil {
		onSend = func(rec load.Record) { book.Sent(rec); tel.RequestStarted(); under.sent(rec) }
		extra = under.part
	}
	// requests of a step's judged time that finish after it are judged
	// as in flight, live and by `judge` alike
	cut := newStepCut(book, func(rec load.Record) {
		files.record(rec.Shard).Write(savedRecord{Record: rec, Late: true})
		tel.RequestDone(rec.Error)
	})
	lopts := lanesOf(cfg, client, clock, sessions, cal.TokensPerWord, 0, cut.add, onSend)
	if r.o.RepeatSameSessions {
		lopts.Fresh = nil
	}
	gen := load.NewGenerator(lopts)
	lanes, stopShards, err := r.shardLanes(ctx, cfg, clock, gen, endpoint, cal.TokensPerWord, cut.add, onSend)
	if err != nil {
		return report.Summary{}, err
	}
	defer stopShards()
	plan := SweepPlan(cfg)
	plan.Previous = previous
	plan.FirstIndex = len(previous)
	plan.Ladder = remaining(cfg.Sweep.Ladder, previous)
	runner := &sweep.Runner{
		Plan: plan, Clock: clock, Load: cut.wrap(lanes), Source: src, Book: book, Progress: r.progress, Extra: extra,
		OnSample: func(s signal.Sample) {
			files.samples.Write(s)
			if tel != nil {
				recent = append(recent, s)
				if len(recent) > 64 {
					recent = recent[len(recent)-64:]
				}
				// the last window, cut once for all three figures
				ttft, inter, share := 0.0, 0.0, math.NaN()
				if w, ok := lastWindow(recent, seconds(cfg.Sweep.WindowS)); ok {
					ttft, inter = windowP90s(w)
					share = windowErrorShare(w)
				}
				tel.ObserveRunning(nanIfZero(ttft), nanIfZero(inter), share)
			}
		},
		OnStepStart: func(i, n int) { tel.SetStep(i, n) },
		// the first failed write stops the run within a scrape
		Stopped: files.err,
		OnStep: func(s sweep.StepResult) error {
			for _, rec := range cut.inFlight(s.Index) {
				files.record(rec.Shard).Write(savedRecord{Record: rec, InFlight: true})
			}
			// a killed run keeps every finished step; a step is kept, and
			// then said, only once what judges it is on disk
			if err := files.keepStep(s); err != nil {
				return err
			}
			r.notify.post(stepMessage(cfg.Recipe.Name, s))
			r.o.Telemetry.ObserveStep(s.Sessions, string(s.Judged.Verdict))
			return nil
		},
	}
	windowEnd := clock.Now() + time.Duration(cfg.Sweep.GPUWindowMin*float64(time.Minute))
	r.o.Telemetry.SetPhase(PhaseSweep)
	r.setStatus(func() live.Status {
		cur := runner.Current()
		st := live.Status{Phase: PhaseSweep, Step: cur.Step, Steps: len(cfg.Sweep.Ladder), Sessions: cur.Sessions,
			InFlight: lanes.InFlight(), WindowLeft: windowEnd - clock.Now(),
			StepLen: runner.Plan.Step, Window: runner.Plan.Window, Clock: clock.Now(), Scale: cfg.TimeScale.Wall(), Virtual: cfg.TimeScale.Virtual()}
		if cur.Step > 0 {
			st.StepLeft = max(0, cur.MeasureEnd-clock.Now())
		}
		st.TTFTP90, st.InteractivityP90 = lastWindowP90s(runner.Samples(), runner.Plan.Window)
		return st
	})
	var res sweep.Result
	var runErr error
	start := time.Now()
	if r.snap != nil {
		r.snap.drop() // the sweep starts: what the resume changed stands
		r.snap = nil
	}
	res, runErr = runner.Run(ctx)
	res.Warnings = append(res.Warnings, src.Warnings()...)
	res.Warnings = append(res.Warnings, r.notes...)
	if under != nil {
		under.stop(clock.Real(seconds(cfg.Evals.TimeoutS)))
		if werr := r.dir.WriteJSON("evals_under_load.json", under.tally.Steps()); werr != nil {
			res.Warnings = append(res.Warnings, "could not save evals_under_load.json: "+werr.Error())
		}
	}
	r.addPhase(report.Phase{Name: PhaseSweep, Status: statusOf(runErr), TookS: time.Since(start).Seconds(), Detail: res.StopReason})
	r.addPhase(report.Phase{Name: PhaseCapacity, Status: "ok", Detail: res.Capacity.String()})
	pf := report.Phase{Name: PhasePostflight, Status: "ok", Detail: fmt.Sprintf("engine idle after %.0fs", res.PostFlight.WaitedS)}
	if !res.PostFlight.Idle {
		pf.Status, pf.Detail = "failed", res.PostFlight.Detail
	}
	r.addPhase(pf)
	if ferr := files.flush(); ferr != nil && runErr == nil {
		runErr = ferr
	}
	res.Warnings = append(res.Warnings, files.warnings()...)
	sum = r.summary(res, &cal)
	markCacheHits(&sum, res.Steps, append(r.savedSamples, runner.Samples()...))
	if err := r.write(&sum); err != nil {
		// the first failed write first: it is what stopped the run
		var we *report.WriteError
		if errors.As(runErr, &we) {
			return sum, errors.Join(&PhaseError{Phase: PhaseSweep, Err: runErr}, err)
		}
		return sum, err
	}
	if mixes := r.otherMixes(ctx, cfg); len(mixes) > 0 {
		sum.Mixes = mixes
		if r.blocked != "" {
			sum.Block(r.blocked)
		}
		if err := r.write(&sum); err != nil {
			return sum, err
		}
	}
	r.notify.post(live.Message{Text: report.DoneText(sum), Event: "done",
		Fields: map[string]any{"recipe": cfg.Recipe.Name, "capacity": sum.Capacity, "cost": sum.Cost, "target": sum.Target, "run_dir": sum.RunDir}})
	var out error
	if runErr != nil {
		out = &PhaseError{Phase: PhaseSweep, Err: runErr}
		if errors.Is(runErr, context.Canceled) {
			out = &Interrupted{Dir: r.dir.Path()}
		}
	}
	// a run is not over until the engine is back where it started
	// (with the metrics gone it could not look: no blame on the engine)
	var gone *sweep.MetricsGone
	if pfErr := postFlightError(res.PostFlight); pfErr != nil && !errors.As(runErr, &gone) {
		out = errors.Join(out, &PhaseError{Phase: PhasePostflight, Err: pfErr})
	}
	return sum, out
}

func statusOf(err error) string {
	if err != nil {
		return "failed"
	}
	return "ok"
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
