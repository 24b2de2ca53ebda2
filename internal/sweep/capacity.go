package sweep

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

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
	// TooClose lists the steps (in sessions) that read too close though no
	// part's curve left the bar, when capacity is still ">= last step": a
	// low step's error interval wide only because it held few turns, bounded
	// by the confident steps above it.
	TooClose []int `json:"too_close_steps,omitempty"`
}

// TargetVerdict says whether the recipe holds the target step, by the same
// rule as every verdict: pass when the capacity interval lies at or above the
// target, fail when it lies below, too close when it touches.
type TargetVerdict struct {
	Sessions int             `json:"sessions"`
	Verdict  verdict.Verdict `json:"verdict"`
}

// partRule says how capacity reads one bar part.
type partRule struct {
	name string
	// ok reports whether a value holds the bar.
	ok func(v, bar float64) bool
	// higherIsWorse says which bound of the interval is worse for the recipe.
	higherIsWorse bool
	// byVerdict reads the part by its verdicts alone, for a part whose bar
	// has its own rule (tool calls under load block only on a confident
	// fail) or that capacity does not know: the centre and optimistic curves
	// hold where the part did not fail, the pessimistic one where it passed,
	// and crossings are not interpolated.
	byVerdict bool
}

var partRules = []partRule{
	{name: verdict.PartTTFT, ok: func(v, b float64) bool { return v <= b }, higherIsWorse: true},
	{name: verdict.PartInteractivity, ok: func(v, b float64) bool { return v >= b }, higherIsWorse: false},
	{name: verdict.PartErrors, ok: func(v, b float64) bool { return v < b }, higherIsWorse: true},
}

// rulesFor returns the rules of every bar part in the steps: the known ones,
// then every other part the steps carry (tool calls and any part added
// later), read by verdict, in the order they first appear.
func rulesFor(pts []Point) []partRule {
	rules := slices.Clone(partRules)
	for _, p := range pts {
		for _, part := range p.Judged.Parts {
			if !slices.ContainsFunc(rules, func(r partRule) bool { return r.name == part.Name }) {
				rules = append(rules, partRule{name: part.Name, byVerdict: true})
			}
		}
	}
	return rules
}

// crossing is where one curve of one part first leaves the bar.
type crossing struct {
	at      float64 // sessions
	reached bool    // false: the curve held the bar at every step
	below   bool    // the curve missed at the first step
	// noData is true when the curve ended because the part had no value at
	// the step after it (a missing measurement), not because it missed.
	noData bool
	step   int // the index of the step at which the curve left the bar
}

// CapacityOf computes capacity from the judged steps of one sweep. For each
// bar part, the centre, pessimistic and optimistic curves are followed up the
// ladder; where a curve first leaves the bar, the crossing is interpolated
// linearly between that step and the one before. A missing value ends a curve
// at the step before it: a missing measurement never passes, but it bounds
// nothing from above, so the upper bound it leaves is open. Every part the
// steps carry takes part, tool calls included; limited_by names the part that
// missed at the step where capacity ended, or "no data: <signals>" when
// nothing missed there and a measurement was lacking.
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
	openHi := math.Inf(1) // the lowest upper bound a missing measurement left
	var binding crossing  // the centre crossing that set c.Sessions
	bindingRule := ""
	closest := "" // the part whose pessimistic bound crossed first
	for _, rule := range rulesFor(pts) {
		center, pess, opt := curveCrossings(pts, rule)
		// the lowest crossing wins; at a tie, a miss names it before no data
		if center.reached && (center.at < c.Sessions || (center.at == c.Sessions && binding.noData && !center.noData)) {
			c.Sessions, binding, bindingRule = center.at, center, rule.name
		}
		if pess.reached {
			if pess.at < c.Lo {
				closest = rule.name
			}
			c.Lo = math.Min(c.Lo, pess.at)
		}
		switch {
		case opt.reached && opt.noData:
			openHi = math.Min(openHi, opt.at)
		case opt.reached:
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
		if close, ok := onlyTooClose(pts); ok {
			// Every part held on every curve; the steps that did not pass
			// were too close on evidence the steps above them settled
			// (few turns' error intervals under the envelope): the ceiling
			// was not reached.
			return Capacity{Sessions: last, Lo: last, Hi: last, LimitedBy: "not reached", AtLeast: true, HiOpen: true, TooClose: close,
				Note: fmt.Sprintf("no part crossed the bar; %s read too close on few turns, which the steps above settled; the ceiling is above %g sessions and was not measured", sessionsList(close), last)}
		}
		// Some step did not pass, yet no part's curve left the bar: the
		// verdicts came from something the parts do not show. Stay at the
		// last step that passed.
		lp := lastPass(pts)
		return Capacity{Sessions: lp, Lo: lp, Hi: lp, LimitedBy: "unknown", HiOpen: true,
			Note: "a step missed the bar without a part crossing it; capacity is the last step that passed"}
	}
	c.LimitedBy = limitedBy(pts[binding.step], bindingRule, binding.noData)
	c.BelowFirst = binding.below && !strings.HasPrefix(c.LimitedBy, "no data")
	if math.IsInf(c.Hi, 1) {
		// no measured crossing bounds capacity from above: the bound is the
		// last step with data, and open
		c.Hi, c.HiOpen = math.Min(openHi, last), true
	}
	if math.IsInf(c.Lo, 1) {
		c.Lo = c.Sessions
	}
	c.Lo = math.Min(c.Lo, c.Sessions)
	c.Hi = math.Max(c.Hi, c.Sessions)
	switch {
	case c.BelowFirst:
		c.Note = fmt.Sprintf("even the first step (%d sessions) missed the bar; nothing below it was measured", pts[0].Sessions)
	case binding.noData && binding.below:
		c.Note = fmt.Sprintf("the first step (%d sessions) read %s: capacity was not measured", pts[0].Sessions, c.LimitedBy)
	case binding.noData && c.HiOpen:
		c.Note = fmt.Sprintf("the step at %d sessions read %s: nothing above %s sessions was measured", pts[binding.step].Sessions, c.LimitedBy, fmtS(c.Hi))
	}
	return c
}

// limitedBy names what ended capacity at step p: the part whose curve left
// the bar there when it missed; when the curve ended for lack of data, the
// part that failed at that step (a part with no data often lacks it because
// another failed: too many errors leave latency unjudged), or else
// "no data: " and the signals (or parts) that were missing.
func limitedBy(p Point, part string, noData bool) string {
	if !noData {
		return part
	}
	for _, rule := range rulesFor([]Point{p}) {
		if q, ok := p.Judged.Part(rule.name); ok && q.Verdict == verdict.Fail {
			return rule.name
		}
	}
	var missing []string
	for _, q := range p.Judged.Parts {
		if q.Verdict == verdict.NoData {
			for _, m := range q.Missing {
				if !slices.Contains(missing, m) {
					missing = append(missing, m)
				}
			}
		}
	}
	if len(missing) == 0 {
		for _, q := range p.Judged.Parts {
			if q.Verdict == verdict.NoData {
				missing = append(missing, q.Name)
			}
		}
	}
	if _, ok := p.Judged.Part(part); !ok && !slices.Contains(missing, part) {
		missing = append(missing, part) // the step does not carry the part at all
	}
	return "no data: " + strings.Join(missing, ", ")
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

// onlyTooClose returns the sessions of the steps that did not pass, and
// whether every one of them was too close (none failed or lacked data).
func onlyTooClose(pts []Point) ([]int, bool) {
	var close []int
	for _, p := range pts {
		switch p.Judged.Verdict {
		case verdict.Pass:
		case verdict.TooClose:
			close = append(close, p.Sessions)
		default:
			return nil, false
		}
	}
	return close, len(close) > 0
}

// sessionsList names steps by their sessions: "the step at 4 sessions",
// "the steps at 4 and 8 sessions".
func sessionsList(s []int) string {
	parts := make([]string, len(s))
	for i, n := range s {
		parts[i] = fmt.Sprint(n)
	}
	if len(s) == 1 {
		return "the step at " + parts[0] + " sessions"
	}
	return "the steps at " + strings.Join(parts[:len(s)-1], ", ") + " and " + parts[len(s)-1] + " sessions"
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
	if rule.byVerdict {
		notFail := func(v verdict.Verdict) bool { return v == verdict.Pass || v == verdict.TooClose }
		passed := func(v verdict.Verdict) bool { return v == verdict.Pass }
		return verdictCross(pts, rule.name, notFail, true, false), verdictCross(pts, rule.name, passed, false, false), verdictCross(pts, rule.name, notFail, true, true)
	}
	return crossAt(pts, rule, pick(0), true, false), crossAt(pts, rule, pick(1), false, rule.name == verdict.PartErrors), crossAt(pts, rule, pick(2), true, false)
}

// lastHeld is the index of the step after which a curve leaves the bar:
// the highest step that held (last) or the last of the first run that held.
func lastHeld(held []bool, last bool) int {
	k := -1
	if last {
		for i := len(held) - 1; i >= 0; i-- {
			if held[i] {
				return i
			}
		}
		return -1
	}
	for i := range held {
		if !held[i] {
			break
		}
		k = i
	}
	return k
}

// hasValue reports whether step p measured the named part.
func hasValue(p Point, name string) bool {
	part, ok := p.Judged.Part(name)
	return ok && part.Verdict != verdict.NoData
}

// verdictCross follows a part by its verdicts: it holds where held says so
// and crosses at the last step that held, or (upper) at the step that did
// not, since nothing tells where in between the part would have missed.
func verdictCross(pts []Point, name string, held func(verdict.Verdict) bool, last, upper bool) crossing {
	ok := make([]bool, len(pts))
	for k, p := range pts {
		part, found := p.Judged.Part(name)
		ok[k] = found && held(part.Verdict)
	}
	k := lastHeld(ok, last)
	switch {
	case k == len(pts)-1:
		return crossing{at: float64(pts[k].Sessions)}
	case k < 0:
		return crossing{at: 0, reached: true, below: true, noData: !hasValue(pts[0], name)}
	}
	c := crossing{at: float64(pts[k].Sessions), reached: true, step: k + 1, noData: !hasValue(pts[k+1], name)}
	if upper && !c.noData {
		c.at = float64(pts[k+1].Sessions)
	}
	return c
}

// crossAt finds where a curve leaves the bar: its first crossing, or (last)
// the crossing after the highest step where it held. A missing value, or a
// confident fail of the part, counts as off the bar.
//
// envelope reads the error part's pessimistic curve under the rule that more
// sessions never make fewer errors: an upper bound measured at a higher step
// also bounds every step below it, so each step's pessimistic value is the
// best of its own and those of the steps above it. A low step whose error
// interval is wide only because it holds few turns (0 errors in 150 turns:
// Wilson's upper bound 2.5% against a 2% bar) then no longer pulls the
// lower bound to 0 when 8 sessions held with confidence; its own verdict
// stays too close. Latency keeps the first crossing: a low step's latency
// miss can be real (a handful of cold prompts) and stays visible.
func crossAt(pts []Point, rule partRule, value func(verdict.Part) float64, last, envelope bool) crossing {
	held := make([]bool, len(pts))
	vals := make([]float64, len(pts))
	measured := func(k int) bool {
		part, ok := pts[k].Judged.Part(rule.name)
		return ok && part.Verdict != verdict.NoData && !math.IsNaN(value(part))
	}
	for k, p := range pts {
		if !measured(k) {
			continue
		}
		part, _ := p.Judged.Part(rule.name)
		vals[k] = value(part)
	}
	if envelope {
		best := math.NaN()
		for k := len(pts) - 1; k >= 0; k-- {
			if !measured(k) {
				continue
			}
			if !math.IsNaN(best) && (rule.higherIsWorse && best < vals[k] || !rule.higherIsWorse && best > vals[k]) {
				vals[k] = best
			}
			best = vals[k]
		}
	}
	for k, p := range pts {
		if measured(k) {
			part, _ := p.Judged.Part(rule.name)
			held[k] = rule.ok(vals[k], part.Bar) && part.Verdict != verdict.Fail
		}
	}
	k := lastHeld(held, last)
	switch {
	case k == len(pts)-1:
		return crossing{at: float64(pts[k].Sessions)} // held to the last step: not reached
	case k < 0:
		return crossing{at: 0, reached: true, below: true, noData: !measured(0)}
	}
	prevS, s := float64(pts[k].Sessions), float64(pts[k+1].Sessions)
	if !measured(k + 1) {
		// nothing measured past it: no interpolation into the unknown
		return crossing{at: prevS, reached: true, noData: true, step: k + 1}
	}
	part, _ := pts[k+1].Judged.Part(rule.name)
	at := prevS
	if v, prevV := vals[k+1], vals[k]; v != prevV {
		at = prevS + (part.Bar-prevV)/(v-prevV)*(s-prevS)
	}
	return crossing{at: math.Max(prevS, math.Min(s, at)), reached: true, step: k + 1}
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
	case c.AtLeast && len(c.TooClose) > 0:
		return fmt.Sprintf(">= %g sessions (no part crossed the bar; the ceiling was not reached; %s read too close on few turns)", c.Sessions, sessionsList(c.TooClose))
	case c.AtLeast:
		return fmt.Sprintf(">= %g sessions (every step passed; the ceiling was not reached)", c.Sessions)
	case c.BelowFirst:
		return fmt.Sprintf("below the first step (95%% interval %s-%s), limited by %s", fmtS(c.Lo), fmtS(c.Hi), c.LimitedBy)
	case c.Sessions == 0 && strings.HasPrefix(c.LimitedBy, "no data"):
		return fmt.Sprintf("not measured (%s from the first step)", c.LimitedBy)
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
