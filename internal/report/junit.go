package report

import (
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// JUnitSuites is junit.xml: one suite per run, one case per step and one for
// the target, so a CI system shows a recipe's verdicts like test results.
type JUnitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is the run's suite.
type JUnitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       float64         `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []JUnitProperty `xml:"properties>property"`
	Cases      []JUnitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

// JUnitProperty is one name=value of the suite: the bar, capacity, cost.
type JUnitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitCase is one step, or the target.
type JUnitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *JUnitFailure `xml:"failure"`
	Error     *JUnitFailure `xml:"error"` // the run ended in a rig error
	Skipped   *JUnitSkipped `xml:"skipped"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// JUnitFailure marks a step or target that did not pass; Type is the
// verdict (fail, too_close, no_data).
type JUnitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// JUnitSkipped marks a case that was not judged (no target was set).
type JUnitSkipped struct {
	Message string `xml:"message,attr"`
}

// JUnit renders junit.xml: a case for each part of each run of each step
// (named by sessions, run and part, so every name is unique, a repeat's
// included), and one for the target. Times are wall seconds, as a CI
// system reads them: the suite's is the run's wall time, a case's its
// step's judged time at the run's time scale (0 on a virtual clock, whose
// modelled time takes no set wall time); the modelled seconds are the
// suite's properties time.modelled_s (the steps' judged time) and
// time.scale.
//
// The target case is the run's verdict. A part that missed at a step above
// the capacity was expected to miss: that is where the sweep found the
// ceiling, and it is a passing case that says so. A miss at or below the
// capacity is a failure, unless the target held: the capacity interval,
// which counts the steps above it that held, already settled it, and a run
// whose target held has no failures. A run that ended in a rig error has
// one more case, in <error>: the run's fault, not the recipe's.
func JUnit(s Summary) ([]byte, error) {
	class := "headroom." + strings.ReplaceAll(s.Recipe.Name, ".", "_")
	suite := JUnitSuite{
		Name:      "headroom " + s.Recipe.Name,
		Timestamp: s.Started,
		Properties: []JUnitProperty{
			{"bar.ttft_p90_s", fmt.Sprint(s.Bar.TTFTP90)},
			{"bar.interactivity_p90_tps", fmt.Sprint(s.Bar.InteractivityP90)},
			{"bar.errors_below_pct", num(s.Bar.ErrorRate * 100)},
			{"capacity", s.Capacity.String()},
			{"cost", costLine(s.Cost)},
			{"run_dir", s.RunDir},
		},
		Time: junitTime(s.WallS),
	}
	modelled := 0.0
	held := s.Target != nil && s.Target.Verdict == verdict.Pass
	c := s.Capacity
	above := func(sessions int) bool {
		return !c.AtLeast && (c.BelowFirst || c.Sessions > 0 && float64(sessions) > c.Sessions)
	}
	runs := map[int]int{}
	for _, st := range s.Steps {
		runs[st.Sessions]++
		run := runs[st.Sessions]
		runWords := fmt.Sprintf("run %d", run)
		if run > 1 {
			runWords += fmt.Sprintf(" (judged on all %d runs pooled)", run)
		}
		var common []string
		for _, m := range st.Missing {
			common = append(common, "missing signal: "+m)
		}
		for _, w := range st.AllWarnings() {
			common = append(common, "warning: "+w)
		}
		parts := st.Parts
		if len(parts) == 0 { // a step judged without parts still gets its case
			parts = []verdict.Part{{Name: "step", Verdict: st.Verdict}}
		}
		for _, p := range parts {
			tc := JUnitCase{
				Name:      fmt.Sprintf("%d sessions, %s: %s within the bar", st.Sessions, runWords, p.Name),
				ClassName: fmt.Sprintf("%s.steps.%d_sessions", class, st.Sessions),
				Time:      junitTime(wallOf(st.EndS-st.MeasureStartS, s.TimeScale)),
			}
			detail := strings.Join(append([]string{partLine(p)}, common...), "\n")
			msg := fmt.Sprintf("%d sessions, %s: %s", st.Sessions, runWords, partLine(p))
			switch {
			case p.Verdict == verdict.Pass:
				tc.SystemOut = detail
			case above(st.Sessions):
				tc.SystemOut = fmt.Sprintf("expected: %d sessions is above the capacity (%s), where the sweep found the ceiling\n%s", st.Sessions, c, detail)
			case held:
				tc.SystemOut = fmt.Sprintf("not a failure: the target of %d sessions held (capacity %s), which counts the steps above this one that held\n%s", s.Target.Sessions, c, detail)
			default:
				tc.Failure = &JUnitFailure{Type: string(p.Verdict), Message: msg, Text: detail}
				suite.Failures++
			}
			suite.Cases = append(suite.Cases, tc)
		}
		modelled += junitTime(st.EndS - st.MeasureStartS)
	}
	suite.Properties = append(suite.Properties, JUnitProperty{"time.wall_s", secondsWords(s.WallS)},
		JUnitProperty{"time.modelled_s", secondsWords(modelled)}, JUnitProperty{"time.scale", timeScaleWords(s.TimeScale)})
	tc := JUnitCase{ClassName: class + ".target"}
	if s.Target == nil {
		tc.Name = "target holds the bar"
		tc.Skipped = &JUnitSkipped{Message: "no target step was set in the run file (sweep.target)"}
		suite.Skipped++
	} else {
		tc.Name = fmt.Sprintf("target of %d sessions holds the bar", s.Target.Sessions)
		msg := fmt.Sprintf("target %d sessions: %s; capacity %s", s.Target.Sessions, verdictWords(s.Target.Verdict), s.Capacity)
		if s.Target.Blocked != "" {
			msg += "; blocked: " + s.Target.Blocked
		}
		if s.Target.Verdict != verdict.Pass {
			tc.Failure = &JUnitFailure{Type: string(s.Target.Verdict), Message: msg, Text: s.Capacity.Note}
			suite.Failures++
		} else {
			tc.SystemOut = msg
		}
	}
	suite.Cases = append(suite.Cases, tc)
	if s.Error != "" {
		// a rig error is not the recipe's miss: it is the run's own error
		suite.Cases = append(suite.Cases, JUnitCase{Name: "the run finished without a rig error", ClassName: class + ".run",
			Error: &JUnitFailure{Type: "rig_error", Message: s.Error}})
		suite.Errors++
	}
	suite.Tests = len(suite.Cases)
	var text strings.Builder
	if err := WriteTextAll(&text, s); err == nil {
		suite.SystemOut = text.String()
	}
	doc := JUnitSuites{Name: "headroom", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Skipped: suite.Skipped, Suites: []JUnitSuite{suite}}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode junit.xml: %w", err)
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

func junitTime(s float64) float64 {
	if math.IsNaN(s) || s < 0 {
		return 0
	}
	return math.Round(s*1000) / 1000
}

// secondsWords is seconds to the millisecond.
func secondsWords(v float64) string {
	return strconv.FormatFloat(junitTime(v), 'f', -1, 64)
}

// stepMessage says which parts kept a step from passing.
func stepMessage(st Step) string {
	var bad []string
	for _, p := range st.Parts {
		if p.Verdict != verdict.Pass {
			bad = append(bad, fmt.Sprintf("%s %s", p.Name, verdictWords(p.Verdict)))
		}
	}
	msg := fmt.Sprintf("%d sessions: %s", st.Sessions, verdictWords(st.Verdict))
	if len(bad) > 0 {
		msg += " (" + strings.Join(bad, ", ") + ")"
	}
	return msg
}

// verdictWords is a verdict as a reader says it.
func verdictWords(v verdict.Verdict) string {
	switch v {
	case verdict.TooClose:
		return "too close to call"
	case verdict.NoData:
		return "no data"
	}
	return string(v)
}
