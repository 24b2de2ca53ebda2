package config

import (
	"fmt"
	"net"

	"github.com/headroom-bench/headroom/internal/recipe"
)

// Canary promotion policies.
const (
	CanaryPromoteNever   = "never"
	CanaryPromoteOnReady = "on_ready"
)

// Canary is a canary on live traffic (headroom canary): the run file's
// recipe is the candidate, Baseline is today's recipe, and a share of live
// sessions goes to the candidate, raised in steps. Both sides are judged on
// bar with sweep.window_s, sweep.scrape_s, sweep.resamples,
// sweep.bootstrap_block and sweep.kill, as a recipe run is.
type Canary struct {
	// Listen is where the agents send their requests; default
	// 127.0.0.1:8001.
	Listen string `json:"listen,omitempty"`
	// Baseline is today's recipe: its endpoint and /metrics URLs.
	Baseline CanarySide `json:"baseline"`
	// Shares are the candidate's share of new sessions at each step, rising,
	// such as [0.01, 0.05, 0.2].
	Shares []float64 `json:"shares"`
	// HoldS is the least time at a share, in seconds, before it is raised,
	// and the time the candidate must hold at the last share to be ready.
	HoldS float64 `json:"hold_s"`
	// MaxHoldS ends the canary undecided when a share has held this long
	// without deciding; 0 (the default) waits as long as it takes.
	MaxHoldS float64 `json:"max_hold_s,omitempty"`
	// SessionHeader, when a request carries it, is its session's id; else a
	// session is known by its leading messages (SessionPrefixBytes of each;
	// default 256).
	SessionHeader      string `json:"session_header,omitempty"`
	SessionPrefixBytes int    `json:"session_prefix_bytes,omitempty"`
	// IdleS is how long a session may go without a request before its next
	// one counts as a new session; default 1800.
	IdleS float64 `json:"idle_s,omitempty"`
	// NoWorse is how much worse than the baseline the candidate may be.
	NoWorse CanaryNoWorse `json:"no_worse,omitempty"`
	// Promote is never (the default: a ready candidate is reported ready)
	// or on_ready: a ready candidate is promoted the way headroom promote
	// does (recipe.deploy.type kubernetes).
	Promote string `json:"promote,omitempty"`
	// Split is what sends the candidate its share: the canary's own proxy
	// at listen (the default) or a Gateway API HTTPRoute's weights.
	Split CanarySplit `json:"split,omitempty"`
}

// Canary split types.
const (
	CanarySplitProxy     = "proxy"
	CanarySplitHTTPRoute = "httproute"
)

// CanaryWeightTotal is what the two backendRefs' weights of an HTTPRoute
// split add up to: a share s is weights (1000(1-s), 1000s), so a share
// under 1/1000 cannot be set.
const CanaryWeightTotal = 1000

// CanarySplit is how the candidate is given its share of new sessions.
type CanarySplit struct {
	// Type is proxy (the default: the agents talk to canary.listen, and
	// the canary's own router splits whole sessions) or httproute (the
	// agents talk to a gateway, and the canary sets the weights of two
	// backendRefs of one rule of a Gateway API HTTPRoute).
	Type string `json:"type,omitempty"`
	// HTTPRoute names the route and its two backendRefs, for type
	// httproute.
	HTTPRoute *CanaryHTTPRoute `json:"httproute,omitempty"`
}

// CanaryHTTPRoute is the HTTPRoute whose weights split the traffic: the
// rule at index Rule of spec.rules must have a backendRef named Baseline
// and one named Candidate (and no other with a weight above 0), and
// session persistence (spec.rules[].sessionPersistence).
type CanaryHTTPRoute struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Rule is the index of the rule in spec.rules; default 0.
	Rule int `json:"rule,omitempty"`
	// Baseline and Candidate are the backendRefs' names (today's recipe's
	// Service and the candidate's).
	Baseline  string `json:"baseline"`
	Candidate string `json:"candidate"`
	// Kubeconfig and Context reach the API server; empty uses
	// $KUBECONFIG, ~/.kube/config or the in-cluster service account, as
	// kubectl does. A relative path is from the run file's folder.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
}

// CanarySide is one side's endpoint and metrics.
type CanarySide struct {
	Endpoint string   `json:"endpoint"`
	Metrics  []string `json:"metrics"`
}

// CanaryNoWorse is how much worse than today the candidate may be and
// still be no worse: tolerance on P90 TTFT and interactivity (a share;
// default 0.1) and error_points on the error rate (a fraction; default
// 0.01).
type CanaryNoWorse struct {
	Tolerance   float64 `json:"tolerance,omitempty"`
	ErrorPoints float64 `json:"error_points,omitempty"`
}

// CanaryDefaults fills the canary section's defaults.
func (c *Canary) fillDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8001"
	}
	if c.SessionPrefixBytes == 0 {
		c.SessionPrefixBytes = 256
	}
	if c.IdleS == 0 {
		c.IdleS = 1800
	}
	if c.NoWorse.Tolerance == 0 {
		c.NoWorse.Tolerance = 0.1
	}
	if c.NoWorse.ErrorPoints == 0 {
		c.NoWorse.ErrorPoints = 0.01
	}
	if c.Promote == "" {
		c.Promote = CanaryPromoteNever
	}
	if c.Split.Type == "" {
		c.Split.Type = CanarySplitProxy
	}
}

// checkCanary validates the canary section, when there is one.
func (r Run) checkCanary() []string {
	c := r.Canary
	if c == nil {
		return nil
	}
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, "canary."+field+": "+fmt.Sprintf(format, args...))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port: %v", c.Listen, err)
	}
	if err := checkURL(c.Baseline.Endpoint); err != nil {
		bad("baseline.endpoint", "%v; today's recipe's base URL, e.g. http://vllm-today:8000", err)
	}
	if len(c.Baseline.Metrics) == 0 {
		bad("baseline.metrics", "name at least one /metrics URL of today's engines: the baseline is judged on what its server reports")
	}
	for i, m := range c.Baseline.Metrics {
		if err := checkURL(m); err != nil {
			bad(fmt.Sprintf("baseline.metrics[%d]", i), "%v", err)
		}
	}
	if r.Recipe.Endpoint == SimEndpoint {
		bad("baseline", "the candidate (recipe.endpoint) is the built-in simulator: a canary splits live traffic between two served recipes, so give the candidate's endpoint and metrics")
	}
	if len(r.Recipe.Metrics) == 0 && r.Recipe.Endpoint != SimEndpoint {
		bad("baseline", "recipe.metrics must name the candidate's /metrics URLs (discovery and Prometheus are not read by a canary yet)")
	}
	if len(c.Shares) == 0 {
		bad("shares", "give the candidate's share of sessions at each step, such as [0.01, 0.05, 0.2]")
	}
	for i, s := range c.Shares {
		if !(s > 0 && s <= 1) {
			bad(fmt.Sprintf("shares[%d]", i), "%g is not a share in (0, 1]", s)
		}
		if i > 0 && s <= c.Shares[i-1] {
			bad(fmt.Sprintf("shares[%d]", i), "%g must be above the step before (%g)", s, c.Shares[i-1])
		}
	}
	if w := r.Sweep.WindowS; w > 0 && c.HoldS < 3*w {
		bad("hold_s", "must hold at least 3 windows of sweep.window_s (%g s) so intervals can be bootstrapped, got %g", w, c.HoldS)
	}
	if c.MaxHoldS != 0 && c.MaxHoldS < c.HoldS {
		bad("max_hold_s", "must be 0 (no limit) or at least hold_s (%g), got %g", c.HoldS, c.MaxHoldS)
	}
	if c.SessionPrefixBytes < 16 {
		bad("session_prefix_bytes", "must be at least 16 bytes, got %d", c.SessionPrefixBytes)
	}
	if c.IdleS <= 0 {
		bad("idle_s", "must be > 0 seconds, got %g", c.IdleS)
	}
	if c.NoWorse.Tolerance < 0 || c.NoWorse.ErrorPoints < 0 || c.NoWorse.ErrorPoints >= 1 {
		bad("no_worse", "tolerance must be >= 0 and error_points in [0, 1), got %+v", c.NoWorse)
	}
	switch c.Promote {
	case CanaryPromoteNever:
	case CanaryPromoteOnReady:
		if t := r.Recipe.Deploy.Type; t != recipe.DeployKubernetes {
			bad("promote", "on_ready keeps and labels the candidate's objects, which only recipe.deploy.type kubernetes can do (it is %q)", typeOr(t))
		}
	default:
		bad("promote", "must be never or on_ready, got %q", c.Promote)
	}
	return append(errs, checkSplit(c)...)
}

// checkSplit validates canary.split.
func checkSplit(c *Canary) []string {
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, "canary.split."+field+": "+fmt.Sprintf(format, args...))
	}
	h := c.Split.HTTPRoute
	switch c.Split.Type {
	case CanarySplitProxy:
		if h != nil {
			bad("httproute", "is set but canary.split.type is proxy: set type: httproute to split through the route's weights, or remove it")
		}
		return errs
	case CanarySplitHTTPRoute:
	default:
		return []string{fmt.Sprintf("canary.split.type: must be proxy (the canary's own router, the default) or httproute (a Gateway API HTTPRoute's weights), got %q", c.Split.Type)}
	}
	if h == nil {
		bad("httproute", "type httproute needs the route: namespace, name, and the names of its two backendRefs, baseline and candidate (docs/canary.md)")
		return errs
	}
	if h.Namespace == "" {
		bad("httproute.namespace", "give the HTTPRoute's namespace")
	}
	if h.Name == "" {
		bad("httproute.name", "give the HTTPRoute's name")
	}
	if h.Rule < 0 {
		bad("httproute.rule", "is an index into the route's spec.rules, >= 0, got %d", h.Rule)
	}
	if h.Baseline == "" {
		bad("httproute.baseline", "give the name of the rule's backendRef that serves today's recipe")
	}
	if h.Candidate == "" {
		bad("httproute.candidate", "give the name of the rule's backendRef that serves the candidate")
	}
	if h.Baseline != "" && h.Baseline == h.Candidate {
		bad("httproute.candidate", "names the same backendRef as baseline (%q): the two sides must be different backends", h.Baseline)
	}
	for i, s := range c.Shares {
		if s > 0 && s < 1.0/CanaryWeightTotal {
			errs = append(errs, fmt.Sprintf("canary.shares[%d]: %g is under what an HTTPRoute split can set (weights out of %d, so at least %g)", i, s, CanaryWeightTotal, 1.0/CanaryWeightTotal))
		}
	}
	return errs
}
