// Package telemetry serves headroom's own Prometheus metrics while a run is
// going: the phase, the step and its sessions, requests in flight, the running
// P90s, the bar they are judged against and each step's verdict, so a
// dashboard can follow a run live (deploy/grafana/headroom.json).
package telemetry

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/verdict"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Phases a run goes through, in order, as package rig names them; SetPhase
// takes one of these or any other name.
var Phases = []string{"rollout", "pre-flight", "mini evals", "sweep", "capacity", "post-flight", "rollback", "promote", "done"}

// ErrorClasses are the load generator's error classes, each counted from 0
// so a healthy run's error panels read 0, not nothing.
var ErrorClasses = []string{load.ErrRefused, load.ErrServer, load.ErrTimeout, load.ErrAborted, load.ErrConnect,
	load.ErrStream, load.ErrUnsent, load.ErrNoUsage, load.ErrEmptyAnswer}

// Bar is the pass line a run judges its steps against.
type Bar struct {
	TTFTP90S            float64 // pass when P90 TTFT <= this
	InteractivityP90TPS float64 // pass when P90 interactivity >= this
	ErrorRate           float64 // pass when errors are below this share
}

// Verdicts a step can get, as package verdict spells them (the label
// values of headroom_steps_total, each counted from 0).
var Verdicts = []string{string(verdict.Pass), string(verdict.TooClose), string(verdict.NoData), string(verdict.Fail)}

// Telemetry holds a run's metrics on its own registry (never the global
// one). A nil *Telemetry is valid and records nothing, so a run without
// --metrics-addr needs no checks.
type Telemetry struct {
	reg *prometheus.Registry

	info          *prometheus.GaugeVec
	phase         *prometheus.GaugeVec
	step          prometheus.Gauge
	sessions      prometheus.Gauge
	inFlight      prometheus.Gauge
	ttftP90       prometheus.Gauge
	interP90      prometheus.Gauge
	errorRate     prometheus.Gauge
	verdict       *prometheus.GaugeVec
	steps         *prometheus.CounterVec
	sent          prometheus.Counter
	failed        *prometheus.CounterVec
	mu            sync.Mutex // guards phaseNames
	phaseNames    map[string]bool
	phaseStarted  prometheus.Gauge
	rollbackError prometheus.Gauge
	barTTFT       prometheus.Gauge
	barInter      prometheus.Gauge
	barErrors     prometheus.Gauge
}

// New makes the metrics for one run of recipe, by headroom version.
func New(recipe, version string) *Telemetry {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	t := &Telemetry{
		reg: reg,
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "headroom_run_info",
			Help: "Always 1; labels name the recipe under test and the headroom version."}, []string{"recipe", "version"}),
		phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "headroom_phase",
			Help: "1 for the phase the run is in, 0 for the others."}, []string{"phase"}),
		phaseStarted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_phase_started_timestamp_seconds",
			Help: "Unix time the current phase started."}),
		step: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_step",
			Help: "Index of the sweep step running now (0-based); -1 outside the sweep."}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_sessions",
			Help: "Concurrent sessions the current step holds."}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_requests_in_flight",
			Help: "Requests sent and not yet finished (subagents make this exceed sessions)."}),
		ttftP90: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_ttft_p90_seconds",
			Help: "Running P90 time to first token of the current step, from server metrics; NaN before data."}),
		interP90: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_interactivity_p90_tokens_per_second",
			Help: "Running P90 interactivity (tokens/s per user that 90% of streams beat) of the current step; NaN before data."}),
		errorRate: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_error_rate",
			Help: "Running error share of the current step: of the requests the server ended in the last window, those with an error status, abort or failure (the verdict divides the whole step's errors by planned turns); NaN before data or when the server reports no outcome counters."}),
		barTTFT: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_bar_ttft_p90_seconds",
			Help: "The bar: a step passes when its P90 time to first token is at most this (compare headroom_ttft_p90_seconds); NaN until set."}),
		barInter: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_bar_interactivity_p90_tokens_per_second",
			Help: "The bar: a step passes when its P90 interactivity is at least this (compare headroom_interactivity_p90_tokens_per_second); NaN until set."}),
		barErrors: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_bar_error_rate",
			Help: "The bar: a step passes when its errors are below this share of its requests (compare headroom_error_rate); NaN until set."}),
		verdict: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "headroom_step_verdict",
			Help: "1 for each judged step's latest verdict (labels: sessions, verdict); headroom_steps_total counts every verdict, repeats included."}, []string{"sessions", "verdict"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "headroom_steps_total",
			Help: "Steps judged, by verdict."}, []string{"verdict"}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "headroom_requests_sent_total",
			Help: "Requests the load generator sent."}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "headroom_requests_failed_total",
			Help: "Requests that ended in an error, by error class (" + strings.Join(ErrorClasses, ", ") + "); unsent turns of failed conversations count too."}, []string{"class"}),
		rollbackError: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_rollback_failed",
			Help: "1 when a rollback failed and the previous recipe is not fully back."}),
		phaseNames: map[string]bool{},
	}
	for _, c := range []prometheus.Collector{t.info, t.phase, t.phaseStarted, t.step, t.sessions, t.inFlight, t.ttftP90,
		t.interP90, t.errorRate, t.barTTFT, t.barInter, t.barErrors, t.verdict, t.steps, t.sent, t.failed, t.rollbackError} {
		f(c)
	}
	t.info.WithLabelValues(recipe, version).Set(1)
	for _, p := range Phases {
		t.phaseNames[p] = true
		t.phase.WithLabelValues(p).Set(0)
	}
	for _, v := range Verdicts {
		t.steps.WithLabelValues(v)
	}
	for _, c := range ErrorClasses {
		t.failed.WithLabelValues(c)
	}
	for _, g := range []prometheus.Gauge{t.barTTFT, t.barInter, t.barErrors} {
		g.Set(nan())
	}
	t.step.Set(-1)
	t.ttftP90.Set(nan())
	t.interP90.Set(nan())
	t.errorRate.Set(nan())
	return t
}

// SetPhase marks name as the phase the run is in.
func (t *Telemetry) SetPhase(name string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phaseNames[name] = true
	for p := range t.phaseNames {
		v := 0.0
		if p == name {
			v = 1
		}
		t.phase.WithLabelValues(p).Set(v)
	}
	t.phaseStarted.Set(float64(time.Now().UnixNano()) / 1e9)
	if name != "sweep" {
		t.step.Set(-1)
	}
}

// SetBar exports the bar the run judges against, so a dashboard draws it
// as thresholds.
func (t *Telemetry) SetBar(b Bar) {
	if t == nil {
		return
	}
	t.barTTFT.Set(b.TTFTP90S)
	t.barInter.Set(b.InteractivityP90TPS)
	t.barErrors.Set(b.ErrorRate)
}

// SetStep marks step i (0-based) with its concurrent sessions as running,
// and clears the running P90s until the step has data.
func (t *Telemetry) SetStep(i, sessions int) {
	if t == nil {
		return
	}
	t.step.Set(float64(i))
	t.sessions.Set(float64(sessions))
	t.ttftP90.Set(nan())
	t.interP90.Set(nan())
	t.errorRate.Set(nan())
}

// ObserveRunning records the current step's running figures; pass NaN for
// one that has no data yet.
func (t *Telemetry) ObserveRunning(ttftP90Seconds, interactivityP90TPS, errorRate float64) {
	if t == nil {
		return
	}
	t.ttftP90.Set(ttftP90Seconds)
	t.interP90.Set(interactivityP90TPS)
	t.errorRate.Set(errorRate)
}

// ObserveStep records a judged step's verdict (one of Verdicts); a repeated
// step replaces its earlier verdict.
func (t *Telemetry) ObserveStep(sessions int, verdict string) {
	if t == nil {
		return
	}
	s := strconv.Itoa(sessions)
	t.verdict.DeletePartialMatch(prometheus.Labels{"sessions": s})
	t.verdict.WithLabelValues(s, verdict).Set(1)
	t.steps.WithLabelValues(verdict).Inc()
}

// RequestStarted counts a request sent and in flight.
func (t *Telemetry) RequestStarted() {
	if t == nil {
		return
	}
	t.sent.Inc()
	t.inFlight.Inc()
}

// RequestDone marks a request finished; errClass is "" for a success, or
// the request's error class.
func (t *Telemetry) RequestDone(errClass string) {
	if t == nil {
		return
	}
	t.inFlight.Dec()
	if errClass != "" {
		t.failed.WithLabelValues(errClass).Inc()
	}
}

// RollbackFailed marks that the rollback did not put the previous recipe back.
func (t *Telemetry) RollbackFailed() {
	if t == nil {
		return
	}
	t.rollbackError.Set(1)
}

// Registry is the registry the metrics live on, to add more or gather them.
func (t *Telemetry) Registry() *prometheus.Registry { return t.reg }

// Handler serves the metrics in the Prometheus exposition format.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{Registry: t.reg})
}

// Serve serves /metrics on addr (e.g. ":9464" or "127.0.0.1:0") until ctx is
// done, and returns the address it listens on once it does.
func (t *Telemetry) Serve(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errors.New("serve metrics: " + err.Error() + "; choose another --metrics-addr")
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", t.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return ln.Addr(), nil
}

func nan() float64 { return math.NaN() }
