package report

import (
	"bytes"
	"encoding/csv"
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestTimeScaleOfAVirtualClock: a virtual-clock run's report read "Time
// scale 0 (modelled seconds per wall second)".
func TestTimeScaleOfAVirtualClock(t *testing.T) {
	s := summaryOf(simLadder(), 8)
	s.TimeScale = 0 // what a virtual clock's summary holds
	page := string(HTML(Run{Summary: s}))
	if !strings.Contains(page, "<dt>Time scale</dt><dd>virtual clock") || strings.Contains(page, "0 (modelled seconds per wall second)") {
		t.Error("report.html does not say the run was on a virtual clock")
	}
	s.TimeScale = 100
	if page := string(HTML(Run{Summary: s})); !strings.Contains(page, "<dt>Time scale</dt><dd>100 (modelled seconds per wall second)</dd>") {
		t.Error("report.html does not give a scaled clock's modelled seconds per wall second")
	}
}

// TestJUnitTimesAreWallSeconds: junit.xml's suite read time=11400 (the
// steps' modelled seconds) for a run of 4 wall seconds.
func TestJUnitTimesAreWallSeconds(t *testing.T) {
	s := summaryOf(simLadder(), 8)
	modelled := 0.0
	for _, st := range s.Steps {
		modelled += st.EndS - st.MeasureStartS
	}
	if modelled < 100 {
		t.Fatalf("the ladder's steps are judged over %g modelled seconds: too few to tell them from the wall time", modelled)
	}
	props := func(su JUnitSuite) map[string]string {
		m := map[string]string{}
		for _, p := range su.Properties {
			m[p.Name] = p.Value
		}
		return m
	}
	for _, c := range []struct {
		scale    float64
		words    string
		caseTime func(modelled float64) float64
	}{
		{0, "virtual clock", func(float64) float64 { return 0 }},
		{100, "100", func(m float64) float64 { return m / 100 }},
	} {
		s.TimeScale, s.WallS = c.scale, 4.2
		su := junitSuite(t, s)
		if su.Time != 4.2 {
			t.Errorf("time scale %s: suite time %g, want the run's 4.2 wall seconds", c.words, su.Time)
		}
		p := props(su)
		got, err := strconv.ParseFloat(p["time.modelled_s"], 64)
		if err != nil || math.Abs(got-modelled) > 0.01 || p["time.wall_s"] != "4.2" || p["time.scale"] != c.words {
			t.Errorf("time scale %s: properties %v, want time.modelled_s %g, time.wall_s 4.2, time.scale %q", c.words, p, modelled, c.words)
		}
		st := s.Steps[0]
		if want := junitTime(c.caseTime(st.EndS - st.MeasureStartS)); su.Cases[0].Time != want {
			t.Errorf("time scale %s: the first case's time %g, want %g wall seconds", c.words, su.Cases[0].Time, want)
		}
	}
}

// TestStepsCSVCountsFromOneInNumbers: steps.csv counted steps from 0,
// stored cache_hit as the string "91%" and printed unrounded floats.
func TestStepsCSVCountsFromOneInNumbers(t *testing.T) {
	s := summaryOf(simLadder(), 8)
	s.Steps[0].TTFTP90.Center = 1.0 / 3
	s.Steps[0].Load.InFlightPerSession = 2.0 / 3
	s.Steps[0].Tokens.Prompt, s.Steps[0].Tokens.Cached, s.Steps[0].CacheReported = 3000, 2730.4, true
	s.Steps[1].Tokens.Cached, s.Steps[1].CacheReported = 0, false
	rows := parseCSV(t, StepsCSV(s))
	col := colIndex(rows[0])
	if _, ok := col["cache_hit_pct"]; !ok {
		t.Fatalf("steps.csv has no cache_hit_pct column: %v", rows[0])
	}
	for i, r := range rows[1:] {
		if r[col["step"]] != strconv.Itoa(i+1) {
			t.Errorf("row %d is step %q, want %d (counted from 1)", i+1, r[col["step"]], i+1)
		}
		for j, v := range r {
			if strings.HasSuffix(v, "%") {
				t.Errorf("row %d, %s: %q is not a number", i+1, rows[0][j], v)
			}
			if dot := strings.IndexByte(v, '.'); dot >= 0 && len(v)-dot-1 > 3 {
				t.Errorf("row %d, %s: %q is not rounded", i+1, rows[0][j], v)
			}
		}
	}
	first := rows[1]
	if first[col["cache_hit_pct"]] != "91.013" || first[col["ttft_p90_s"]] != "0.333" || first[col["in_flight_per_session"]] != "0.667" {
		t.Errorf("step 1: cache hit %q, TTFT %q, in flight %q; want 91.013, 0.333, 0.667", first[col["cache_hit_pct"]], first[col["ttft_p90_s"]], first[col["in_flight_per_session"]])
	}
	if v := rows[2][col["cache_hit_pct"]]; v != "" {
		t.Errorf("step 2 reports no cache hits, yet cache_hit_pct is %q", v)
	}
}

func parseCSV(t *testing.T, b []byte) [][]string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(rows) < 3 {
		t.Fatalf("steps.csv (%v): %q", err, b)
	}
	return rows
}
