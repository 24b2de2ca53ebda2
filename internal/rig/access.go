package rig

import (
	"errors"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/transport"
)

// access is how the run reaches each kind of server, resolved from the
// environment once when the run starts, and the redactor that keeps every
// credential it read out of what the run writes.
type access struct {
	endpoint   transport.Conn // load, evals, /tokenize, /v1/models, readiness
	metrics    transport.Conn // the /metrics targets, fixed or discovered
	prometheus transport.Conn // the Prometheus server, when the recipe names one
	redact     *transport.Redactor
}

// resolveAccess reads the recipe's credentials from env (os.LookupEnv when
// nil) and loads its TLS files; every missing variable is named at once.
func resolveAccess(cfg config.Run, env transport.Env) (access, error) {
	rc := cfg.Recipe
	a := access{redact: new(transport.Redactor)}
	var errs []error
	var err error
	if a.endpoint, err = rc.EndpointAuth().Resolve("recipe", env, rc.Dir); err != nil {
		errs = append(errs, err)
	}
	if rc.MetricsAuth != nil {
		if a.metrics, err = rc.MetricsAuth.Resolve("recipe.metrics_auth", env, rc.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if rc.Prometheus != nil {
		if a.prometheus, err = rc.Prometheus.Auth.Resolve("recipe.prometheus", env, rc.Dir); err != nil {
			errs = append(errs, err)
		}
		a.redact.AddURL(rc.Prometheus.URL)
	}
	if err := errors.Join(errs...); err != nil {
		return access{}, errors.New(recipe.EndpointField(err.Error()))
	}
	for _, c := range []transport.Conn{a.endpoint, a.metrics, a.prometheus} {
		a.redact.Add(c.Secrets...)
	}
	a.redact.AddURL(rc.Endpoint)
	for _, m := range rc.Metrics {
		a.redact.AddURL(m)
	}
	a.redact.AddURL(cfg.Notify.Webhook)
	return a, nil
}

// probeTimeout bounds each pre-flight and scrape request.
const probeTimeout = 10 * time.Second
