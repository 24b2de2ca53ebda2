package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/transport"
)

// checkAccess reports every problem with how the recipe's servers are
// reached: the endpoint's key, headers and TLS, the metrics targets' auth,
// the Prometheus source and discovery. Nothing is read from the
// environment here: that happens when a run starts.
func checkAccess(rc recipe.Recipe) []string {
	errs := rc.EndpointAuth().Check("recipe")
	for i, e := range errs {
		errs[i] = recipe.EndpointField(e)
	}
	if rc.MetricsAuth != nil {
		errs = append(errs, rc.MetricsAuth.Check("recipe.metrics_auth")...)
	}
	if p := rc.Prometheus; p != nil {
		if err := checkURL(p.URL); err != nil {
			errs = append(errs, fmt.Sprintf("recipe.prometheus.url: %v; give the Prometheus server's base URL, e.g. http://prometheus.monitoring:9090", err))
		}
		if s := strings.TrimSpace(p.Selector); s != "" && (!strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}")) {
			errs = append(errs, fmt.Sprintf("recipe.prometheus.selector: %q: write label matchers in braces, e.g. {namespace=\"llm\",job=\"vllm\"}", p.Selector))
		}
		errs = append(errs, p.Auth.Check("recipe.prometheus")...)
	}
	if d := rc.Discovery; d != nil {
		k := d.Kubernetes
		if k == nil {
			errs = append(errs, "recipe.discovery: name how targets are found, e.g. kubernetes: {namespace: llm, service: vllm, port: metrics}")
		} else {
			if k.Service == "" && k.Selector == "" {
				errs = append(errs, "recipe.discovery.kubernetes: give service (the Service whose EndpointSlices list the pods) or selector (a label selector on EndpointSlices)")
			}
			if k.Port == "" {
				errs = append(errs, "recipe.discovery.kubernetes.port: give the metrics port, a number or the port's name in the EndpointSlice")
			} else if n, err := strconv.Atoi(k.Port); err == nil && (n < 1 || n > 65535) {
				errs = append(errs, fmt.Sprintf("recipe.discovery.kubernetes.port: %d is not a port", n))
			}
			if k.Scheme != "" && k.Scheme != "http" && k.Scheme != "https" {
				errs = append(errs, fmt.Sprintf("recipe.discovery.kubernetes.scheme: must be http or https, got %q", k.Scheme))
			}
			if k.Path != "" && !strings.HasPrefix(k.Path, "/") {
				errs = append(errs, fmt.Sprintf("recipe.discovery.kubernetes.path: must start with /, got %q", k.Path))
			}
		}
		if len(rc.Metrics) > 0 {
			errs = append(errs, "recipe.discovery: is set beside recipe.metrics; scrape either fixed URLs or discovered pods, not both (a gateway's fixed URL and discovered engines would be summed twice if they overlap)")
		}
	}
	return errs
}

// Redacted is r as it may be written (config.yaml, --print-config): URL
// user info and credential query parameters redacted, and header values
// that do not name an environment variable replaced by [redacted]. Names of
// environment variables are kept: they are not secrets.
func (r Run) Redacted() Run {
	rc := r.Recipe
	rc.Endpoint = transport.URL(rc.Endpoint)
	rc.Metrics = redactURLs(rc.Metrics)
	rc.Headers = redactHeaders(rc.Headers)
	if rc.MetricsAuth != nil {
		a := *rc.MetricsAuth
		a.Headers = redactHeaders(a.Headers)
		rc.MetricsAuth = &a
	}
	if rc.Prometheus != nil {
		p := *rc.Prometheus
		p.URL = transport.URL(p.URL)
		p.Headers = redactHeaders(p.Headers)
		rc.Prometheus = &p
	}
	r.Recipe = rc
	if r.Notify.Webhook != "" {
		r.Notify.Webhook = redactWebhook(r.Notify.Webhook)
	}
	if g := r.Notify.GitHub; g != nil && g.API != "" {
		c := *g
		c.API = transport.URL(c.API)
		r.Notify.GitHub = &c
	}
	return r
}

// RedactedCredentials names the fields of a run file read back from a run
// directory whose URL user info was redacted when it was written: the
// credentials they carried are gone, so a run resumed from it cannot reach
// those URLs as the first run did.
func (r Run) RedactedCredentials() []string {
	var out []string
	check := func(field, u string) {
		if p, err := url.Parse(u); err == nil && p.User != nil && p.User.Username() == transport.RedactedUser {
			out = append(out, field)
		}
	}
	check("recipe.endpoint", r.Recipe.Endpoint)
	for i, m := range r.Recipe.Metrics {
		check(fmt.Sprintf("recipe.metrics[%d]", i), m)
	}
	if p := r.Recipe.Prometheus; p != nil {
		check("recipe.prometheus.url", p.URL)
	}
	return out
}

// WithoutRedactedNotify is r without the notify targets that were redacted
// when a run directory's run file was written, and their fields' names: a
// webhook, whose path is its secret, and a GitHub API URL that carried
// user info. A run resumed with them would post to a URL that is not the
// one it was given.
func (r Run) WithoutRedactedNotify() (Run, []string) {
	var dropped []string
	if u, err := url.Parse(r.Notify.Webhook); err == nil && r.Notify.Webhook != "" && u.Path == "/"+transport.Redacted {
		r.Notify.Webhook, dropped = "", append(dropped, "notify.webhook")
	}
	if g := r.Notify.GitHub; g != nil {
		if u, err := url.Parse(g.API); err == nil && u.User != nil && u.User.Username() == transport.RedactedUser {
			r.Notify.GitHub, dropped = nil, append(dropped, "notify.github.api")
		}
	}
	return r, dropped
}

func redactURLs(us []string) []string {
	if us == nil {
		return nil
	}
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = transport.URL(u)
	}
	return out
}

func redactHeaders(h map[string]string) map[string]string {
	if h == nil {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		if strings.Contains(v, "${") {
			out[k] = v
		} else {
			out[k] = transport.Redacted
		}
	}
	return out
}

// redactWebhook keeps a webhook's scheme and host: an incoming-webhook URL's
// path is its secret.
func redactWebhook(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return transport.Redacted
	}
	return u.Scheme + "://" + u.Host + "/" + transport.Redacted
}
