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
	return errs
}
