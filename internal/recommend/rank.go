package recommend

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// ResultVersion is the version of the search's JSON.
const ResultVersion = 1

// What became of a candidate, in the order they are listed.
const (
	// Holds: the target step passed; ranked by $ per session-hour.
	Holds = "holds"
	// NeedsWindow: the capacity interval straddles the target, or the
	// target read no data: only a GPU window can settle it.
	NeedsWindow = "needs_gpu_window"
	// DoesNotHold: the capacity interval lies below the target.
	DoesNotHold = "does_not_hold"
	// Failed: the simulated run ended in an error.
	Failed = "error"
	// Skipped: not run (an invalid combination, or over a constraint).
	Skipped = "skipped"
)

// Result is a search's answer: every candidate, the ranked first.
type Result struct {
	Version     int         `json:"version"`
	Space       string      `json:"space"`
	Base        string      `json:"base"`
	Target      int         `json:"target_sessions"`
	Bar         verdict.Bar `json:"bar"`
	Constraints Constraints `json:"constraints"`
	Candidates  []Ranked    `json:"candidates"`
	// Counts is how many candidates each status holds.
	Counts map[string]int `json:"counts"`
	WallS  float64        `json:"wall_s"`
}

// Ranked is one candidate with what its simulation found and where it
// stands.
type Ranked struct {
	Candidate
	Status string `json:"status"`
	// Rank is the place among the candidates that hold the target, from 1
	// (the cheapest per session-hour); 0 for the others.
	Rank int `json:"rank,omitempty"`
	// TooCloseWith lists the ranks next to this one whose $ per
	// session-hour intervals overlap it: the order between them is not
	// settled.
	TooCloseWith []int     `json:"too_close_with,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	Capacity     *Interval `json:"capacity,omitempty"`
	LimitedBy    string    `json:"limited_by,omitempty"`
	// AtLeast: every step held, so capacity is a lower bound and its cost
	// an upper bound.
	AtLeast bool `json:"at_least,omitempty"`
	// BelowFirst: even the first step (FirstStep sessions) missed.
	BelowFirst bool `json:"below_first,omitempty"`
	// NotEstablished: no step passed, so no capacity was measured.
	NotEstablished bool `json:"not_established,omitempty"`
	// HiOpen: the capacity interval's upper end was not measured (the
	// top of the ladder held there): it is a floor, not a bound.
	HiOpen    bool `json:"hi_open,omitempty"`
	FirstStep int  `json:"first_step_sessions,omitempty"`
	// TargetVerdict is the target step's verdict from the capacity interval.
	TargetVerdict verdict.Verdict `json:"target_verdict,omitempty"`
	// USDPerSessionHour is the hourly price over capacity, its interval from
	// the capacity interval; Lo is 0 when capacity has no upper bound.
	USDPerSessionHour   *Interval `json:"usd_per_session_hour,omitempty"`
	USDPerMillionTokens *float64  `json:"usd_per_million_tokens,omitempty"`
	Steps               int       `json:"steps"`
	// ModelledMin is the modelled minutes the run took to its last step:
	// roughly the GPU window a real sweep of it needs, rollout aside.
	ModelledMin float64 `json:"modelled_min"`
	WallS       float64 `json:"wall_s"`
	RunDir      string  `json:"run_dir,omitempty"`
	StopReason  string  `json:"stop_reason,omitempty"`
}

// Interval is a value with its 95% interval.
type Interval struct {
	Center float64 `json:"value"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
}

// MarshalJSON writes the interval; an end that is not finite (a cost with
// no upper bound) is null.
func (iv Interval) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Center *float64 `json:"value"`
		Lo     *float64 `json:"lo"`
		Hi     *float64 `json:"hi"`
	}{finite(&iv.Center), finite(&iv.Lo), finite(&iv.Hi)})
}

// Rank sorts outcomes into the result: the candidates whose target held,
// cheapest per session-hour first, each marked too close to call when its
// cost interval overlaps a neighbour's; then those that need a GPU window,
// those that do not hold the target, those whose simulation failed and
// those skipped.
func Rank(s Space, outs []Outcome) Result {
	res := Result{Version: ResultVersion, Space: s.File, Base: s.BaseName, Target: s.Target,
		Constraints: s.Constraints, Counts: map[string]int{}}
	for _, o := range outs {
		r := assess(o)
		if res.Target == 0 && o.Config.Sweep.Target > 0 {
			res.Target = o.Config.Sweep.Target
		}
		if res.Bar == (verdict.Bar{}) && o.Skip == "" {
			res.Bar = rig.BarOf(o.Config.Bar)
		}
		res.Candidates = append(res.Candidates, r)
		res.Counts[r.Status]++
	}
	order := map[string]int{Holds: 0, NeedsWindow: 1, DoesNotHold: 2, Failed: 3, Skipped: 4}
	slices.SortStableFunc(res.Candidates, func(a, b Ranked) int {
		if c := cmp.Compare(order[a.Status], order[b.Status]); c != 0 || a.Status != Holds {
			return c
		}
		if c := cmp.Compare(a.USDPerSessionHour.Center, b.USDPerSessionHour.Center); c != 0 {
			return c
		}
		return cmp.Compare(a.USDPerSessionHour.Hi, b.USDPerSessionHour.Hi)
	})
	for i := range res.Candidates {
		r := &res.Candidates[i]
		if r.Status != Holds {
			break
		}
		r.Rank = i + 1
		if i > 0 && overlap(*res.Candidates[i-1].USDPerSessionHour, *r.USDPerSessionHour) {
			prev := &res.Candidates[i-1]
			prev.TooCloseWith = append(prev.TooCloseWith, r.Rank)
			r.TooCloseWith = append(r.TooCloseWith, prev.Rank)
		}
	}
	for i := range res.Candidates {
		r := &res.Candidates[i]
		if len(r.TooCloseWith) > 0 {
			r.Reason = "too close to call with " + ranks(r.TooCloseWith) + ": the $ per session-hour intervals overlap"
		}
	}
	return res
}

// assess reads what one outcome says about its candidate.
func assess(o Outcome) Ranked {
	r := Ranked{Candidate: o.Candidate, WallS: o.WallS}
	if o.Skip != "" {
		r.Status, r.Reason = Skipped, o.Skip
		return r
	}
	s := o.Summary
	r.RunDir, r.StopReason, r.Steps = s.RunDir, s.StopReason, len(s.Steps)
	for _, st := range s.Steps {
		r.ModelledMin = max(r.ModelledMin, st.EndS/60)
	}
	c := s.Capacity
	if len(s.Steps) > 0 {
		r.Capacity = &Interval{Center: c.Sessions, Lo: c.Lo, Hi: c.Hi}
		r.LimitedBy, r.AtLeast, r.BelowFirst, r.FirstStep = c.LimitedBy, c.AtLeast, c.BelowFirst, s.Steps[0].Sessions
		r.NotEstablished, r.HiOpen = c.NotEstablished, c.HiOpen
	}
	if cost := sessionHour(s.Cost, c); cost != nil {
		r.USDPerSessionHour = cost
	}
	r.USDPerMillionTokens = finite(s.Cost.USDPerMillionTokens)
	if s.Target != nil {
		r.TargetVerdict = s.Target.Verdict
	}
	target := o.Config.Sweep.Target
	switch {
	case o.Err != nil:
		r.Status, r.Reason = Failed, "the simulated run ended in an error: "+oneLine(o.Err.Error())
	case s.Target == nil || len(s.Steps) == 0:
		r.Status, r.Reason = NeedsWindow, "no step was judged, so the target read no data"
	case s.Target.Verdict == verdict.Pass && r.USDPerSessionHour != nil:
		r.Status = Holds
	case s.Target.Verdict == verdict.Fail:
		r.Status = DoesNotHold
		r.Reason = fmt.Sprintf("capacity %s lies below the target %d, limited by %s", span(c), target, c.LimitedBy)
		if c.BelowFirst {
			r.Reason = fmt.Sprintf("even the first step (%d sessions) missed the bar, limited by %s; the target is %d", r.FirstStep, c.LimitedBy, target)
		}
	case s.Target.Verdict == verdict.TooClose:
		r.Status = NeedsWindow
		r.Reason = fmt.Sprintf("capacity %s straddles the target %d: too close to call in simulation", span(c), target)
	default:
		r.Status = NeedsWindow
		r.Reason = fmt.Sprintf("the target %d read %s (capacity %s, limited by %s)", target, s.Target.Verdict, span(c), c.LimitedBy)
	}
	return r
}

// sessionHour is the cost per session-hour with its interval; the low end
// is 0 when capacity has no upper bound (every step held, or the top of
// its interval was not measured). nil when there is no cost.
func sessionHour(cost sweep.Cost, c sweep.Capacity) *Interval {
	center := finite(cost.USDPerSessionHour)
	if center == nil {
		return nil
	}
	iv := &Interval{Center: *center, Lo: *center, Hi: *center}
	if lo := finite(cost.USDPerSessionHourLo); lo != nil {
		iv.Lo = *lo
	}
	if hi := finite(cost.USDPerSessionHourHi); hi != nil {
		iv.Hi = *hi
	} else if c.Lo <= 0 {
		iv.Hi = math.Inf(1)
	}
	if cost.AtMost || c.AtLeast || c.HiOpen {
		iv.Lo = 0
	}
	return iv
}

func overlap(a, b Interval) bool { return a.Lo <= b.Hi && b.Lo <= a.Hi }

func finite(p *float64) *float64 {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) {
		return nil
	}
	v := *p
	return &v
}

// span is a capacity's interval in words.
func span(c sweep.Capacity) string {
	if c.AtLeast {
		return fmt.Sprintf(">= %s", num(c.Sessions))
	}
	hi := num(c.Hi)
	if c.HiOpen {
		hi = ">=" + hi
	}
	return fmt.Sprintf("%s (95%% interval %s-%s)", num(c.Sessions), num(c.Lo), hi)
}

func ranks(rs []int) string {
	var w []string
	for _, r := range rs {
		w = append(w, fmt.Sprintf("#%d", r))
	}
	return strings.Join(w, " and ")
}

// num writes a number of sessions or dollars without trailing zeros.
func num(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsNaN(v):
		return "n/a"
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
