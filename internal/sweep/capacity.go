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
	// Bracket is the ladder's own bracket beside the fitted interval: the
	// most sessions of a step that passed and the fewest of a step above
	// it that did not; 0 where there is none ([0, 4]: no step held, 4
	// missed; [12, 0]: every step held). Summaries before version 2 lack
	// it; report fills it from their steps.
	Bracket [2]int `json:"bracket"`
	// NotEstablished is true when no step passed: the run measured no
	// capacity, whatever a fit of its steps says, and Sessions is 0; the
	// note holds each step's evidence, Hi what bounds it from above.
	NotEstablished bool `json:"not_established,omitempty"`
}

// TargetVerdict says whether the recipe holds the target step, by the same
// rule as every verdict: pass when the capacity interval lies at or above the
// target, fail when it lies below, too close when it touches.
type TargetVerdict struct {
	Sessions int             `json:"sessions"`
	Verdict  verdict.Verdict `json:"verdict"`
	// Blocked is why the target fails whatever the capacity (a mini eval
	// suite that failed with confidence); empty when capacity decides.
	Blocked string `json:"blocked,omitempty"`
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

// CapacityOf computes capacity from the judged steps of one sweep. Each bar
// part with a value is fitted from every judged step at once (fitCrossings:
// a monotone curve of the part against sessions, its interval from
// resampling each step within its own interval); a part read by verdict
// (tool calls) crosses at the steps. Capacity is the lowest crossing, its
// bounds the lowest bounds. A missing value ends a part's curve at the step
// before it: a missing measurement never passes, but it bounds nothing from
// above, so the upper bound it leaves is open. limited_by names the part
// that missed at the step where capacity ended, or "no data: <signals>" when
// nothing missed there and a measurement was lacking. The ladder bracket
// (the last step that held, the first above it that did not) goes beside
// it, and a sweep in which no step passed establishes no capacity: it reads
// 0 sessions, not established, with the steps' evidence in its note.
func CapacityOf(points []Point) Capacity {
	c := capacityOf(points)
	if len(points) == 0 {
		return c
	}
	pts := append([]Point(nil), points...)
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Sessions < pts[j].Sessions })
	c.Bracket = BracketOf(pts)
	if c.Bracket[0] > 0 {
		if b := float64(c.Bracket[1]); b > 0 && !c.AtLeast && !c.HiOpen && c.Hi < b {
			// the fit interpolates in the gap between the step that held
			// and the one that missed, in the log of each part's value; a
			// part that jumps there (an engine tipping into overload)
			// crosses later than that says, and no step inside the gap
			// shows where: the upper bound is the step that missed
			c.Hi = b
		}
		return c
	}
	// no step held the bar: nothing was established, whatever a fit says
	c.NotEstablished, c.AtLeast, c.TooClose = true, false, nil
	if c.Sessions == 0 && strings.HasPrefix(c.LimitedBy, "no data") {
		return c // not measured: the note already says why
	}
	if !c.BelowFirst && c.LimitedBy == "not reached" {
		c.LimitedBy = "unknown"
	}
	if c.Hi <= 0 {
		c.Hi = float64(pts[0].Sessions) // somewhere below the first step
	}
	c.Sessions, c.Lo = 0, 0
	note := "no step held the bar: " + evidence(pts)
	if c.Note != "" {
		note = strings.TrimSuffix(c.Note, ".") + "; " + note
	}
	c.Note = note
	return c
}

// BracketOf is the ladder's bracket: the most sessions of a step that
// passed, and the fewest of a step above it that did not (0: none).
func BracketOf(pts []Point) [2]int {
	var b [2]int
	for _, p := range pts {
		if p.Judged.Verdict == verdict.Pass {
			b[0] = max(b[0], p.Sessions)
		}
	}
	for _, p := range pts {
		if p.Judged.Verdict != verdict.Pass && p.Sessions > b[0] && (b[1] == 0 || p.Sessions < b[1]) {
			b[1] = p.Sessions
		}
	}
	return b
}

// evidence says what each step read, part by part where a part did not
// pass: "4 sessions too_close (errors 0.0% (0.0-2.4%), bar < 2%)".
func evidence(pts []Point) string {
	var out []string
	for _, p := range pts {
		var why []string
		for _, q := range p.Judged.Parts {
			if q.Verdict != verdict.Pass {
				why = append(why, partEvidence(q))
			}
		}
		line := fmt.Sprintf("%d sessions %s", p.Sessions, p.Judged.Verdict)
		if len(why) > 0 {
			line += " (" + strings.Join(why, "; ") + ")"
		}
		out = append(out, line)
	}
	return strings.Join(out, ", ")
}

func partEvidence(q verdict.Part) string {
	v := q.Value
	if q.Verdict == verdict.NoData || math.IsNaN(v.Center) {
		return q.Name + " no data"
	}
	switch q.Name {
	case verdict.PartTTFT:
		return fmt.Sprintf("ttft %s %.2f s (%.2f-%.2f), bar <= %g s", q.Verdict, v.Center, v.Lo, v.Hi, q.Bar)
	case verdict.PartInteractivity:
		return fmt.Sprintf("interactivity %s %.1f tok/s (%.1f-%.1f), bar >= %g", q.Verdict, v.Center, v.Lo, v.Hi, q.Bar)
	case verdict.PartErrors:
		return fmt.Sprintf("errors %s %.1f%% (%.1f-%.1f%%), bar < %g%%", q.Verdict, v.Center*100, v.Lo*100, v.Hi*100, q.Bar*100)
	}
	return fmt.Sprintf("%s %s %.3g (%.3g-%.3g), bar %g", q.Name, q.Verdict, v.Center, v.Lo, v.Hi, q.Bar)
}

func capacityOf(points []Point) Capacity {
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

// curveCrossings is one part's centre, pessimistic and optimistic
// crossings: from every judged step at once for a part with a value
// (fitCrossings), by verdict for a part read by verdict.
func curveCrossings(pts []Point, rule partRule) (center, pess, opt crossing) {
	if rule.byVerdict {
		notFail := func(v verdict.Verdict) bool { return v == verdict.Pass || v == verdict.TooClose }
		passed := func(v verdict.Verdict) bool { return v == verdict.Pass }
		return verdictCross(pts, rule.name, notFail, true, false), verdictCross(pts, rule.name, passed, false, false), verdictCross(pts, rule.name, notFail, true, true)
	}
	return fitCrossings(pts, rule)
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
	case c.Sessions == 0 && strings.HasPrefix(c.LimitedBy, "no data"):
		return fmt.Sprintf("not measured (%s from the first step)", c.LimitedBy)
	case c.BelowFirst && c.Bracket[1] > 0:
		return fmt.Sprintf("below the first step (%d sessions): not established, no step held the bar; limited by %s", c.Bracket[1], c.LimitedBy)
	case c.BelowFirst:
		return fmt.Sprintf("below the first step (95%% interval %s-%s), limited by %s", fmtS(c.Lo), fmtS(c.Hi), c.LimitedBy)
	case c.NotEstablished:
		hi := fmtS(c.Hi)
		if c.HiOpen {
			hi = ">=" + hi
		}
		return fmt.Sprintf("not established: no step held the bar (95%% interval 0-%s; ladder: first miss at %d sessions), limited by %s", hi, c.Bracket[1], c.LimitedBy)
	}
	hi := fmtS(c.Hi)
	if c.HiOpen {
		hi = ">=" + hi
	}
	return fmt.Sprintf("%s sessions (95%% interval %s-%s%s), limited by %s", fmtS(c.Sessions), fmtS(c.Lo), hi, c.BracketWords(), c.LimitedBy)
}

// BracketWords is the ladder's bracket as the capacity line gives it beside
// the interval: "; ladder: 8 held, 12 missed"; empty when it is not known
// (a summary written before version 2).
func (c Capacity) BracketWords() string {
	switch held, missed := c.Bracket[0], c.Bracket[1]; {
	case held > 0 && missed > 0:
		return fmt.Sprintf("; ladder: %d held, %d missed", held, missed)
	case held > 0:
		return fmt.Sprintf("; ladder: %d held", held)
	case missed > 0:
		return fmt.Sprintf("; ladder: none held, %d missed", missed)
	}
	return ""
}

func fmtS(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprintf("%.1f", v)
}
