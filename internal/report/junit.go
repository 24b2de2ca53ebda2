package report

import (
	"encoding/xml"
	"fmt"
	"math"
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

// JUnit renders junit.xml. Each step's time is its judged time in modelled
// seconds.
func JUnit(s Summary) ([]byte, error) {
	class := "headroom." + strings.ReplaceAll(s.Recipe.Name, ".", "_")
	suite := JUnitSuite{
		Name:      "headroom " + s.Recipe.Name,
		Timestamp: s.Started,
		Properties: []JUnitProperty{
			{"bar.ttft_p90_s", fmt.Sprint(s.Bar.TTFTP90)},
			{"bar.interactivity_p90_tps", fmt.Sprint(s.Bar.InteractivityP90)},
			{"bar.error_rate", fmt.Sprint(s.Bar.ErrorRate)},
			{"capacity", s.Capacity.String()},
			{"cost", costLine(s.Cost)},
			{"run_dir", s.RunDir},
		},
	}
	for _, st := range s.Steps {
		c := JUnitCase{
			Name:      fmt.Sprintf("%d sessions hold the bar", st.Sessions),
			ClassName: class + ".steps",
			Time:      junitTime(st.EndS - st.MeasureStartS),
		}
		var lines []string
		for _, p := range st.Parts {
			lines = append(lines, fmt.Sprintf("%s: %s, %s, bar %g, source %s", p.Name, p.Verdict, p.Value, p.Bar, p.Source))
		}
		for _, m := range st.Missing {
			lines = append(lines, "missing signal: "+m)
		}
		for _, w := range st.AllWarnings() {
			lines = append(lines, "warning: "+w)
		}
		detail := strings.Join(lines, "\n")
		if st.Verdict != verdict.Pass {
			c.Failure = &JUnitFailure{Type: string(st.Verdict), Message: stepMessage(st), Text: detail}
			suite.Failures++
		} else {
			c.SystemOut = detail
		}
		suite.Time += c.Time
		suite.Cases = append(suite.Cases, c)
	}
	tc := JUnitCase{ClassName: class + ".target"}
	if s.Target == nil {
		tc.Name = "target holds the bar"
		tc.Skipped = &JUnitSkipped{Message: "no target step was set in the run file (sweep.target)"}
		suite.Skipped++
	} else {
		tc.Name = fmt.Sprintf("target of %d sessions holds the bar", s.Target.Sessions)
		msg := fmt.Sprintf("target %d sessions: %s; capacity %s", s.Target.Sessions, verdictWords(s.Target.Verdict), s.Capacity)
		if s.Target.Verdict != verdict.Pass {
			tc.Failure = &JUnitFailure{Type: string(s.Target.Verdict), Message: msg, Text: s.Capacity.Note}
			suite.Failures++
		} else {
			tc.SystemOut = msg
		}
	}
	suite.Cases = append(suite.Cases, tc)
	suite.Tests = len(suite.Cases)
	var text strings.Builder
	if err := WriteText(&text, s); err == nil {
		suite.SystemOut = text.String()
	}
	doc := JUnitSuites{Name: "headroom", Tests: suite.Tests, Failures: suite.Failures, Skipped: suite.Skipped, Suites: []JUnitSuite{suite}}
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
