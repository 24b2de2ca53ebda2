package live

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func TestLineShowsWhatTheRunIsDoing(t *testing.T) {
	s := Status{Phase: "sweep", Step: 3, Steps: 8, Sessions: 6, InFlight: 7, TTFTP90: 2.345, InteractivityP90: 13.6,
		StepLeft: 95 * time.Second, WindowLeft: 75 * time.Minute}
	line := s.Line()
	for _, want := range []string{"sweep", "step 3/8: 6 sessions, 7 in flight", "P90 TTFT 2.35s", "P90 13.6 tok/s/user", "step left 1m35s", "window left 1h15m"} {
		if !strings.Contains(line, want) {
			t.Errorf("status line %q lacks %q", line, want)
		}
	}
	if got := (Status{Phase: "pre-flight"}).Line(); got != "pre-flight" {
		t.Errorf("a bare phase renders %q", got)
	}
}

func TestQuietWhenNotATerminalOrInCI(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if IsTerminal(&bytes.Buffer{}, env(nil)) {
		t.Error("a buffer is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f, env(nil)) {
		t.Error("a regular file is not a terminal")
	}
	if IsTerminal(os.Stderr, env(map[string]string{"CI": "true"})) {
		t.Error("in CI the view must stay quiet")
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestViewRedrawsAndClears(t *testing.T) {
	var out syncBuf
	n := 0
	var mu sync.Mutex
	v := StartView(&out, time.Millisecond, func() Status {
		mu.Lock()
		defer mu.Unlock()
		n++
		return Status{Phase: "sweep", Step: 1, Steps: 2, Sessions: n}
	})
	deadline := time.Now().Add(2 * time.Second)
	for strings.Count(out.String(), "\r") < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	v.Stop()
	got := out.String()
	if strings.Count(got, "\r") < 3 || !strings.Contains(got, "step 1/2") {
		t.Errorf("view wrote %q", got)
	}
	if !strings.HasSuffix(got, "\r") {
		t.Errorf("Stop did not clear the line: %q", got)
	}
}

func TestFitKeepsTheLineInsideTheTerminal(t *testing.T) {
	s := Status{Phase: "sweep", Step: 3, Steps: 8, Sessions: 6, InFlight: 7, TTFTP90: 2.345, InteractivityP90: 13.6,
		StepLeft: 95 * time.Second, WindowLeft: 75 * time.Minute, Clock: 750 * time.Second, Scale: 100}
	full := s.Line()
	cases := []struct {
		width   int
		want    []string // kept
		notWant []string // left out
	}{
		// Wide enough: everything.
		{200, []string{"window left", "step left", "t=12m30s modelled (x100)", "P90 TTFT"}, nil},
		// 80 columns: the GPU window's and the step's time left go first.
		{80, []string{"step 3/8: 6 sessions", "P90 TTFT 2.35s", "P90 13.6 tok/s/user"}, []string{"window left", "step left"}},
		// Narrow: the step and its P90 TTFT stay longest.
		{50, []string{"sweep | step 3/8: 6 sessions"}, []string{"window left", "step left", "in flight"}},
		// Narrower than the bare essentials: cut with an ellipsis.
		{12, []string{"sweep | ste…"}, nil},
	}
	for _, c := range cases {
		got := s.Fit(c.width)
		if n := utf8.RuneCountInString(got); n > c.width {
			t.Errorf("Fit(%d) = %q: %d characters", c.width, got, n)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("Fit(%d) = %q lacks %q", c.width, got, w)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(got, w) {
				t.Errorf("Fit(%d) = %q keeps %q", c.width, got, w)
			}
		}
	}
	if got := s.Fit(0); got != full {
		t.Errorf("Fit(0) = %q, want the whole line %q", got, full)
	}
}

func TestModelledTimeIsLabelled(t *testing.T) {
	cases := []struct {
		s    Status
		want string // "" for no clock on the line
	}{
		// A scaled clock: its times are modelled, and the line says so.
		{Status{Phase: "sweep", Clock: 750 * time.Second, Scale: 100}, "t=12m30s modelled (x100)"},
		// A virtual clock runs as fast as the computation.
		{Status{Phase: "sweep", Clock: 90 * time.Second, Virtual: true}, "t=1m30s modelled (virtual clock)"},
		// Wall time: the time, without the label.
		{Status{Phase: "sweep", Clock: 750 * time.Second, Scale: 1}, "t=12m30s"},
		// No clock given: nothing.
		{Status{Phase: "sweep"}, ""},
	}
	for _, c := range cases {
		got := c.s.Line()
		if c.want == "" {
			if strings.Contains(got, "t=") {
				t.Errorf("%+v renders %q, want no clock", c.s, got)
			}
			continue
		}
		if !strings.Contains(got, c.want) || (c.s.Scale == 1 && strings.Contains(got, "modelled")) {
			t.Errorf("%+v renders %q, want %q", c.s, got, c.want)
		}
	}
}

func TestWarmingUpInsteadOfEarlyP90s(t *testing.T) {
	step := func(left time.Duration) Status {
		return Status{Phase: "sweep", Step: 2, Steps: 5, Sessions: 8, TTFTP90: 9.9, InteractivityP90: 3.3,
			StepLen: 900 * time.Second, Window: 30 * time.Second, StepLeft: left}
	}
	cases := []struct {
		name    string
		s       Status
		warming bool
		word    string // what stands in for the P90s; default "warming up"
	}{
		// The sweep's lanes priming before its first step.
		{"before the first step", Status{Phase: "sweep", TTFTP90: 26, StepLen: 900 * time.Second, Window: 30 * time.Second}, true, ""},
		// A step's judged time is over: the next one has not started.
		{"after the judged time", step(0), true, "between steps"},
		// In the warm-up (more than the judged time left): the P90s are the step before's.
		{"warm-up", step(950 * time.Second), true, ""},
		// The first seconds of the judged time: less than a window judged.
		{"first seconds", step(890 * time.Second), true, ""},
		// A whole window judged: the running P90s are this step's.
		{"one window in", step(870 * time.Second), false, ""},
		// Step length not known: shown as they come, as before.
		{"unknown length", Status{Phase: "sweep", Step: 1, Steps: 2, TTFTP90: 1, StepLeft: time.Second}, false, ""},
	}
	for _, c := range cases {
		got := c.s.Line()
		word := c.word
		if word == "" {
			word = "warming up"
		}
		if c.warming != strings.Contains(got, word) || c.warming == strings.Contains(got, "P90 TTFT") {
			t.Errorf("%s: %q, want %q %v and P90s %v", c.name, got, word, c.warming, !c.warming)
		}
	}
}

func TestViewCutsToTheWidth(t *testing.T) {
	var out syncBuf
	cols := 40
	v := startView(&out, time.Millisecond, func() Status {
		return Status{Phase: "sweep", Step: 1, Steps: 2, Sessions: 4, InFlight: 5, TTFTP90: 1.5, StepLeft: time.Minute, WindowLeft: time.Hour}
	}, func() int { return cols })
	deadline := time.Now().Add(2 * time.Second)
	for strings.Count(out.String(), "\r") < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	v.Stop()
	for _, l := range strings.Split(out.String(), "\r") {
		if n := utf8.RuneCountInString(l); n >= cols {
			t.Errorf("a redraw of %d characters on a %d-column terminal: %q", n, cols, l)
		}
	}
	// Not a terminal: no width, the whole line.
	if w := Width(&bytes.Buffer{})(); w != 0 {
		t.Errorf("Width of a buffer = %d, want 0", w)
	}
}
