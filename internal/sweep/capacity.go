package sweep

import (
	"fmt"
	"math"
	"sort"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// Point is one judged step as capacity sees it.
type Point struct {
	Sessions int
	Judged   verdict.Step
}

// Capacity is the most concurrent sessions a recipe holds at the bar, with a
// 95% interval. Nothing is extrapolated beyond the steps that ran.
type Capacity struct {
	Sessions  float64 `json:"sessions"`
	Lo        float64 `json:"lo"`
	Hi        float64 `json:"hi"`
	LimitedBy string  `json:"limited_by"` // the part that crossed first, or "not reached"
	// AtLeast is true when every step passed: capacity reads ">= last step".
	AtLeast bool `json:"at_least"`
	// BelowFirst is true when even the first step missed the bar.
	BelowFirst bool `json:"below_first"`
	// HiOpen is true when the upper bound is the last step run, not a crossing.
	HiOpen bool   `json:"hi_open,omitempty"`
	Note   string `json:"note,omitempty"`
}

// TargetVerdict says whether the recipe holds the target step, by the same
// rule as every verdict: pass when the capacity interval lies at or above the
// target, fail when it lies below, too close when it touches.
type TargetVerdict struct {
	Sessions int             `json:"sessions"`
	Verdict  verdict.Verdict `json:"verdict"`
}

// partRule says which way a part's bar points.
type partRule struct {
	name string
	// ok reports whether a value holds the bar.
	ok func(v, bar float64) bool
	// pessimistic picks the bound of the interval that is worse for the recipe.
	higherIsWorse bool
}

var partRules = []partRule{
	{name: "ttft", ok: func(v, b float64) bool { return v <= b }, higherIsWorse: true},
	{name: "interactivity", ok: func(v, b float64) bool { return v >= b }, higherIsWorse: false},
	{name: "errors", ok: func(v, b float64) bool { return v < b }, higherIsWorse: true},
}

// crossing is where one curve of one part first leaves the bar.
type crossing struct {
	at      float64 // sessions
	reached bool    // false: the curve held the bar at every step
	below   bool    // the curve missed at the first step
}

// CapacityOf computes capacity from the judged steps of one sweep. For each
// bar part, the centre, pessimistic and optimistic curves are followed up the
// ladder; where a curve first leaves the bar, the crossing is interpolated
// linearly between that step and the one before. A missing value ends a curve
// at the step before it: a missing measurement never passes.
func CapacityOf(points []Point) Capacity {
	if len(points) == 0 {
		return Capacity{LimitedBy: "no data", Note: "no step ran"}
	}
	pts := append([]Point(nil), points...)
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Sessions < pts[j].Sessions })
	last := float64(pts[len(pts)-1].Sessions)

	allPass := true
	for _, p := range pts {
		if p.Judged.Verdict != verdict.Pass {
			allPass = false
		}
	}
	if allPass {
		return Capacity{Sessions: last, Lo: last, Hi: last, LimitedBy: "not reached", AtLeast: true, HiOpen: true,
			Note: fmt.Sprintf("every step passed; the ceiling is above %g sessions and was not measured", last)}
	}

	c := Capacity{Sessions: math.Inf(1), Lo: math.Inf(1), Hi: math.Inf(1)}
	closest := "" // the part whose pessimistic bound crossed first
	for _, rule := range partRules {
		center, pess, opt := curveCrossings(pts, rule)
		if center.reached && center.at < c.Sessions {
			c.Sessions, c.LimitedBy = center.at, rule.name
			c.BelowFirst = center.below
		}
		if pess.reached {
			if pess.at < c.Lo {
				closest = rule.name
			}
			c.Lo = math.Min(c.Lo, pess.at)
		}
		if opt.reached {
			c.Hi = math.Min(c.Hi, opt.at)
		}
	}
	if math.IsInf(c.Sessions, 1) && !math.IsInf(c.Lo, 1) {
		// No centre left the bar, but an interval touched it: capacity is
		// the last step, its interval reaches down to where a bound crossed,
		// and nothing above the last step was measured.
		return Capacity{Sessions: last, Lo: math.Min(c.Lo, last), Hi: last, HiOpen: true, LimitedBy: closest,
			Note: fmt.Sprintf("no step failed; %s came too close to the bar, and nothing above %g sessions was measured", closest, last)}
	}
	if math.IsInf(c.Sessions, 1) {
		// Some step did not pass, yet no part's curve left the bar: the
		// verdicts came from something the parts do not show (e.g. too few
		// turns). Stay at the last step that passed.
		lp := lastPass(pts)
		return Capacity{Sessions: lp, Lo: lp, Hi: lp, LimitedBy: "unknown", HiOpen: true,
			Note: "a step missed the bar without a part crossing it; capacity is the last step that passed"}
	}
	if math.IsInf(c.Hi, 1) {
		c.Hi, c.HiOpen = last, true
	}
	if math.IsInf(c.Lo, 1) {
		c.Lo = c.Sessions
	}
	c.Lo = math.Min(c.Lo, c.Sessions)
	c.Hi = math.Max(c.Hi, c.Sessions)
	if c.LimitedBy == "" {
		c.LimitedBy = "unknown"
	}
	if c.BelowFirst {
		c.Note = fmt.Sprintf("even the first step (%d sessions) missed the bar; nothing below it was measured", pts[0].Sessions)
	}
	return c
}

func lastPass(pts []Point) float64 {
	lp := 0.0
	for _, p := range pts {
		if p.Judged.Verdict != verdict.Pass {
			break
		}
		lp = float64(p.Sessions)
	}
	return lp
}

// curveCrossings follows one part's centre, pessimistic and optimistic
// values up the ladder. The pessimistic curve's first crossing bounds
// capacity from below (close calls stay close); the centre and optimistic
// curves cross where the part last leaves the bar, since capacity is the
// most sessions the recipe holds: a noisy low step whose centre touched the
// bar widens the interval down, but does not hide the steps above it that
// held.
func curveCrossings(pts []Point, rule partRule) (center, pess, opt crossing) {
	pick := func(which int) func(verdict.Part) float64 {
		return func(p verdict.Part) float64 {
			switch {
			case which == 0:
				return p.Value.Center
			case (which == 1) == rule.higherIsWorse:
				return p.Value.Hi
			default:
				return p.Value.Lo
			}
		}
	}
	return crossAt(pts, rule, pick(0), true), crossAt(pts, rule, pick(1), false), crossAt(pts, rule, pick(2), true)
}

// crossAt finds where a curve leaves the bar: its first crossing, or (last)
// the crossing after the highest step where it held. A missing value, or a
// confident fail of the part, counts as off the bar.
func crossAt(pts []Point, rule partRule, value func(verdict.Part) float64, last bool) crossing {
	held := make([]bool, len(pts))
	vals := make([]float64, len(pts))
	for k, p := range pts {
		part, ok := p.Judged.Part(rule.name)
		if !ok || part.Verdict == verdict.NoData || math.IsNaN(value(part)) {
			continue
		}
		vals[k] = value(part)
		held[k] = rule.ok(vals[k], part.Bar) && part.Verdict != verdict.Fail
	}
	k := -1 // the step after which the curve leaves the bar
	if last {
		for i := len(pts) - 1; i >= 0; i-- {
			if held[i] {
				k = i
				break
			}
		}
	} else {
		for i := range pts {
			if !held[i] {
				break
			}
			k = i
		}
	}
	switch {
	case k == len(pts)-1:
		return crossing{at: float64(pts[k].Sessions)} // held to the last step: not reached
	case k < 0:
		return crossing{at: 0, reached: true, below: true}
	}
	prevS, s := float64(pts[k].Sessions), float64(pts[k+1].Sessions)
	part, ok := pts[k+1].Judged.Part(rule.name)
	if !ok || part.Verdict == verdict.NoData || math.IsNaN(value(part)) {
		return crossing{at: prevS, reached: true} // nothing measured past it: no interpolation into the unknown
	}
	at := prevS
	if v, prevV := vals[k+1], vals[k]; v != prevV {
		at = prevS + (part.Bar-prevV)/(v-prevV)*(s-prevS)
	}
	return crossing{at: math.Max(prevS, math.Min(s, at)), reached: true}
}

// Target judges the target step against the capacity interval.
func (c Capacity) Target(target int) TargetVerdict {
	t := float64(target)
	v := verdict.TooClose
	switch {
	case c.Lo >= t:
		v = verdict.Pass
	case c.Hi < t && c.HiOpen:
		// the ladder ended below the target without measuring it
		v = verdict.NoData
	case c.Hi < t:
		v = verdict.Fail
	}
	return TargetVerdict{Sessions: target, Verdict: v}
}

// String is the capacity line of the summary.
func (c Capacity) String() string {
	switch {
	case c.AtLeast:
		return fmt.Sprintf(">= %g sessions (every step passed; the ceiling was not reached)", c.Sessions)
	case c.BelowFirst:
		return fmt.Sprintf("below the first step (95%% interval %s-%s), limited by %s", fmtS(c.Lo), fmtS(c.Hi), c.LimitedBy)
	}
	hi := fmtS(c.Hi)
	if c.HiOpen {
		hi = ">=" + hi
	}
	return fmt.Sprintf("%s sessions (95%% interval %s-%s), limited by %s", fmtS(c.Sessions), fmtS(c.Lo), hi, c.LimitedBy)
}

func fmtS(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprintf("%.1f", v)
}
