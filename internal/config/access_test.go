package config

import (
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/transport"
	"sigs.k8s.io/yaml"
)

func realEndpoint() Run {
	r := Default()
	r.Recipe.Endpoint, r.Recipe.Metrics, r.TimeScale = "https://gw.example", []string{"https://gw.example/metrics"}, 1
	r.Recipe.Sim = SimSpec{}
	return r
}

func TestAccessFieldsAreChecked(t *testing.T) {
	r := realEndpoint()
	r.Recipe.APIKeyEnv = "sk-pasted-the-key-itself"
	r.Recipe.Headers = map[string]string{"X Bad": "v"}
	r.Recipe.Prometheus = &recipe.PrometheusSpec{URL: "prom:9090", Selector: `job="vllm"`}
	r.Recipe.Discovery = &recipe.DiscoverySpec{Kubernetes: &recipe.KubernetesDiscovery{Port: "99999"}}
	err := r.Validate()
	if err == nil {
		t.Fatal("bad access fields passed")
	}
	for _, want := range []string{"recipe.api_key_env: \"sk-pasted", "recipe.headers: \"X Bad\"", "recipe.prometheus.url", "recipe.prometheus.selector", "give service", "99999 is not a port", "beside recipe.metrics"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
	// A Prometheus server alone is enough to judge on.
	r = realEndpoint()
	r.Recipe.Metrics = nil
	r.Recipe.Prometheus = &recipe.PrometheusSpec{URL: "http://127.0.0.1:9090", Selector: `{job="vllm"}`}
	if err := r.Validate(); err != nil {
		t.Errorf("prometheus instead of metrics: %v", err)
	}
}

func TestRedactedKeepsNoSecret(t *testing.T) {
	r := realEndpoint()
	r.Recipe.Endpoint = "https://alice:endpoint-pw@gw.example"
	r.Recipe.Metrics = []string{"https://scraper:metrics-pw@gw.example/metrics?token=tok-123"}
	r.Recipe.APIKeyEnv = "GW_KEY"
	r.Recipe.Headers = map[string]string{"X-Literal": "literal-secret", "X-Ref": "${TEAM}"}
	r.Recipe.Prometheus = &recipe.PrometheusSpec{URL: "https://p:prom-pw@prom.example", Auth: transport.Auth{Headers: map[string]string{"X-Org": "org-secret"}}}
	r.Notify.Webhook = "https://hooks.example/services/T000/B000/hook-secret"
	b, err := yaml.Marshal(r.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, leak := range []string{"endpoint-pw", "metrics-pw", "tok-123", "literal-secret", "prom-pw", "org-secret", "hook-secret", "alice"} {
		if strings.Contains(out, leak) {
			t.Errorf("the redacted run file holds %q", leak)
		}
	}
	for _, keep := range []string{"GW_KEY", "${TEAM}", "gw.example", "hooks.example"} {
		if !strings.Contains(out, keep) {
			t.Errorf("the redacted run file lost %q", keep)
		}
	}
	if r.Recipe.Headers["X-Literal"] != "literal-secret" {
		t.Error("Redacted changed the run it was called on")
	}
}

// TestRedactedParsesBack: the run directory's config.yaml is the redacted
// run file, and `judge`, reports and `--resume` read it back, so a run whose
// URLs carried user info must still parse (with "[redacted]@" they did not:
// brackets are not allowed in a URL's user info).
func TestRedactedParsesBack(t *testing.T) {
	r := realEndpoint()
	r.Recipe.Endpoint = "https://alice:endpoint-pw@gw.example"
	// first judged through a Prometheus server, then on fixed metrics URLs
	r.Recipe.Prometheus = &recipe.PrometheusSpec{URL: "https://p:prom-pw@prom.example", Selector: `{job="vllm"}`}
	r.Recipe.Metrics = nil
	for _, withMetrics := range []bool{false, true} {
		if withMetrics {
			r.Recipe.Prometheus = nil
			r.Recipe.Metrics = []string{"https://scraper:metrics-pw@gw.example/metrics"}
		}
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
		b, err := yaml.Marshal(r.Redacted())
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(b, "config.yaml")
		if err != nil {
			t.Fatalf("the redacted run file does not parse back: %v\n%s", err, b)
		}
		if strings.Contains(back.Recipe.Endpoint, "alice") || !strings.Contains(back.Recipe.Endpoint, "gw.example") {
			t.Errorf("endpoint read back as %q", back.Recipe.Endpoint)
		}
	}
}

// TestMaxOverContextZeroAllowsNone: 0 is a setting (no turn may exceed the
// context), not "take the default".
func TestMaxOverContextZeroAllowsNone(t *testing.T) {
	b := strings.Replace(string(DefaultYAML()), "  request_timeout_s: 600\n", "  request_timeout_s: 600\n  max_over_context: 0\n", 1)
	r, err := Parse([]byte(b), "run.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Workload.MaxOver(); got != 0 {
		t.Errorf("max_over_context: 0 reads %g", got)
	}
	if got := Default().Workload.MaxOver(); got != 0.01 {
		t.Errorf("default %g, want 0.01", got)
	}
}
