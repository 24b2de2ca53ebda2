package rig

import (
	"fmt"
	"path/filepath"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/transport"
)

// resolvePaths makes every file the run file names absolute, so the
// config.yaml a run directory keeps means the same files wherever `judge`
// or `--resume` runs from: the traces and custom evals (read from the
// working directory) and the recipe's files (read from its folder).
func resolvePaths(cfg config.Run) (config.Run, error) {
	var errs []error
	abs := func(field string, p *string) {
		if *p == "" || filepath.IsAbs(*p) {
			return
		}
		a, err := filepath.Abs(*p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q: %w", field, *p, err))
			return
		}
		*p = a
	}
	if cfg.Workload.Traces != "synth" {
		abs("workload.traces", &cfg.Workload.Traces)
	}
	cfg.Evals.Custom = append([]string(nil), cfg.Evals.Custom...)
	for i := range cfg.Evals.Custom {
		abs(fmt.Sprintf("evals.custom[%d]", i), &cfg.Evals.Custom[i])
	}
	abs("output", &cfg.Output)

	rc := &cfg.Recipe
	abs("recipe", &rc.Dir)
	// a path the recipe names is read from its folder
	inRecipe := func(field string, p *string) {
		if *p == "" || filepath.IsAbs(*p) {
			return
		}
		*p = rc.Path(*p)
		abs(field, p)
	}
	inRecipe("recipe.mapping_file", &rc.MappingFile)
	if name := rc.Sim.Profile; name != "" {
		if _, err := sim.ProfileByName(name); err != nil {
			inRecipe("recipe.sim.profile", &rc.Sim.Profile)
		}
	}
	if _, ok := rc.ParentFile(); ok {
		inRecipe("recipe.parent", &rc.Parent)
	}
	tls := func(field string, t **transport.TLS) {
		if *t == nil {
			return
		}
		c := **t
		inRecipe(field+".ca_file", &c.CAFile)
		inRecipe(field+".cert_file", &c.CertFile)
		inRecipe(field+".key_file", &c.KeyFile)
		*t = &c
	}
	tls("recipe.tls", &rc.TLS)
	if rc.MetricsAuth != nil {
		a := *rc.MetricsAuth
		tls("recipe.metrics_auth.tls", &a.TLS)
		rc.MetricsAuth = &a
	}
	if rc.Prometheus != nil {
		p := *rc.Prometheus
		tls("recipe.prometheus.tls", &p.TLS)
		rc.Prometheus = &p
	}
	if rc.Discovery != nil && rc.Discovery.Kubernetes != nil {
		k := *rc.Discovery.Kubernetes
		inRecipe("recipe.discovery.kubernetes.kubeconfig", &k.Kubeconfig)
		disc := *rc.Discovery
		disc.Kubernetes = &k
		rc.Discovery = &disc
	}
	if k := rc.Deploy.Kubernetes; k != nil {
		kk := *k
		kk.Manifests = append([]string(nil), k.Manifests...)
		for i := range kk.Manifests {
			inRecipe(fmt.Sprintf("recipe.deploy.kubernetes.manifests[%d]", i), &kk.Manifests[i])
		}
		inRecipe("recipe.deploy.kubernetes.kubeconfig", &kk.Kubeconfig)
		rc.Deploy.Kubernetes = &kk
	}
	if len(errs) > 0 {
		return cfg, fmt.Errorf("resolve the run file's paths: %v", errs)
	}
	return cfg, nil
}
