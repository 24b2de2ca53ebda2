// Package live tells people on the terminal how a run is going while it
// runs: one status line, redrawn in place and cut to the terminal's width,
// quiet when stderr is not a terminal or in CI. (Posting to a webhook or a
// pull request is package notify's job.)
package live

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/headroom-bench/headroom/internal/notify"
	"golang.org/x/term"
)

// Message is what the run posts as it goes.
//
// Deprecated: use notify.Message; this alias stays until rig.go does.
type Message = notify.Message

// Status is what the run is doing now.
type Status struct {
	Phase    string
	Step     int // 1-based; 0 before the sweep
	Steps    int
	Sessions int
	InFlight int
	// TTFTP90 and InteractivityP90 are the last window's, NaN-free: 0 when unknown.
	TTFTP90          float64
	InteractivityP90 float64
	StepLeft         time.Duration // modelled time left in the step, warm-up included
	WindowLeft       time.Duration // modelled time left in the GPU window
	// StepLen is a step's judged time and Window one judged window, both
	// modelled. Before the first step, while a step is warming up, and
	// until one window of its judged time has passed, the line says
	// "warming up" instead of P90s, which would still be the priming's, the
	// warm-up's or the step before's; after its judged time, "between
	// steps". Zero StepLen: not known, the P90s are shown as they come.
	StepLen, Window time.Duration
	// Clock is the run's modelled time now; 0 leaves it off the line.
	Clock time.Duration
	// Scale is how many modelled seconds pass per wall second (0 or 1:
	// wall time). Virtual is a virtual clock, on which modelled time runs
	// as fast as the computation. Either way the line labels its times
	// as modelled.
	Scale   float64
	Virtual bool
}

// between says what stands in for the running P90s while they would not be
// this step's: "warming up" before the first step and until a step has
// judged one whole window, "between steps" once its judged time is over;
// "" when the P90s are the step's (or the step's length is not known).
func (s Status) between() string {
	if s.StepLen <= 0 {
		return ""
	}
	if s.Step == 0 {
		return "warming up" // lanes priming before the first step
	}
	if s.StepLeft <= 0 {
		return "between steps"
	}
	if judged := s.StepLen - s.StepLeft; judged < max(s.Window, time.Nanosecond) {
		return "warming up" // negative judged time: in the warm-up
	}
	return ""
}

// scaled reports whether the line's times are not wall time.
func (s Status) scaled() bool { return s.Virtual || (s.Scale > 0 && s.Scale != 1) }

// segment is one part of the line; parts with a higher drop give way
// first when the line is too wide: shortened when they have a short form,
// else left out.
type segment struct {
	text  string
	drop  int
	short string
}

func (s Status) segments() []segment {
	out := []segment{{text: s.Phase}}
	if s.Step > 0 {
		short := fmt.Sprintf("step %d/%d: %d sessions", s.Step, s.Steps, s.Sessions)
		out = append(out, segment{text: fmt.Sprintf("%s, %d in flight", short, s.InFlight), drop: 7, short: short})
	}
	if b := s.between(); b != "" {
		out = append(out, segment{text: b})
	} else {
		if s.TTFTP90 > 0 {
			out = append(out, segment{text: fmt.Sprintf("P90 TTFT %.2fs", s.TTFTP90), drop: 4})
		}
		if s.InteractivityP90 > 0 {
			out = append(out, segment{text: fmt.Sprintf("P90 %.1f tok/s/user", s.InteractivityP90), drop: 5})
		}
	}
	if s.StepLeft > 0 {
		out = append(out, segment{text: fmt.Sprintf("step left %s", s.StepLeft.Round(time.Second)), drop: 8})
	}
	if s.WindowLeft > 0 {
		out = append(out, segment{text: fmt.Sprintf("window left %s", s.WindowLeft.Round(time.Minute)), drop: 9})
	}
	if s.Clock > 0 || s.scaled() {
		t := "t=" + s.Clock.Round(time.Second).String()
		switch {
		case s.Virtual:
			t += " modelled (virtual clock)"
		case s.scaled():
			t += fmt.Sprintf(" modelled (x%g)", s.Scale)
		}
		out = append(out, segment{text: t, drop: 6})
	}
	return out
}

// Line renders a status as one line.
func (s Status) Line() string { return s.Fit(0) }

// Fit renders a status as one line of at most width characters (no limit
// when width <= 0): the least telling parts are left out first (the GPU
// window's time left, the step's, requests in flight, modelled time, the
// running P90s) and what still does not fit is cut with "…".
func (s Status) Fit(width int) string {
	segs := s.segments()
	join := func() string {
		parts := make([]string, 0, len(segs))
		for _, g := range segs {
			parts = append(parts, g.text)
		}
		return strings.Join(parts, " | ")
	}
	line := join()
	if width <= 0 {
		return line
	}
	for utf8.RuneCountInString(line) > width {
		worst := -1
		for i, g := range segs {
			if g.drop > 0 && (worst < 0 || g.drop > segs[worst].drop) {
				worst = i
			}
		}
		switch {
		case worst < 0:
			// nothing left to give way
		case segs[worst].short != "":
			segs[worst] = segment{text: segs[worst].short}
		default:
			segs = append(segs[:worst], segs[worst+1:]...)
		}
		if worst < 0 {
			break
		}
		line = join()
	}
	if utf8.RuneCountInString(line) > width {
		r := []rune(line)
		if width == 1 {
			return "…"
		}
		line = string(r[:width-1]) + "…"
	}
	return line
}

// IsTerminal reports whether w is an interactive terminal worth redrawing a
// status line on: a character device, not in CI, not TERM=dumb.
func IsTerminal(w io.Writer, getenv func(string) string) bool {
	if getenv("CI") != "" || getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// View redraws a status line on a terminal every interval until stopped.
type View struct {
	w      io.Writer
	status func() Status
	cols   func() int // the terminal's width; 0 when not known
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	width  int // characters on the line now
}

// StartView starts redrawing status() on w every interval, cut to the
// terminal's width when w is a terminal (read at each redraw, so it follows
// a resize). Call Stop before printing anything else to w.
func StartView(w io.Writer, interval time.Duration, status func() Status) *View {
	return startView(w, interval, status, Width(w))
}

// Width returns a function that reads the width of the terminal w is, or
// 0 when w is not a terminal.
func Width(w io.Writer) func() int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() int { return 0 }
	}
	return func() int {
		cols, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return cols
	}
}

func startView(w io.Writer, interval time.Duration, status func() Status, cols func() int) *View {
	v := &View{w: w, status: status, cols: cols, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(v.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			v.draw()
			select {
			case <-v.stop:
				v.clear()
				return
			case <-t.C:
			}
		}
	}()
	return v
}

func (v *View) draw() {
	v.mu.Lock()
	defer v.mu.Unlock()
	// one column short of the edge, so the cursor never wraps the line;
	// not a terminal (0): the whole line, as it comes
	line := v.status().Fit(max(v.cols()-1, 0))
	n := utf8.RuneCountInString(line)
	pad := ""
	if v.width > n {
		pad = strings.Repeat(" ", v.width-n)
	}
	fmt.Fprintf(v.w, "\r%s%s", line, pad)
	v.width = n
}

func (v *View) clear() {
	v.mu.Lock()
	defer v.mu.Unlock()
	fmt.Fprintf(v.w, "\r%s\r", strings.Repeat(" ", v.width))
}

// Writer returns a writer for other output on the same terminal: it clears
// the status line first, and the next redraw puts it back under the output.
func (v *View) Writer() io.Writer { return viewWriter{v} }

type viewWriter struct{ v *View }

func (w viewWriter) Write(p []byte) (int, error) {
	w.v.mu.Lock()
	defer w.v.mu.Unlock()
	fmt.Fprintf(w.v.w, "\r%s\r", strings.Repeat(" ", w.v.width))
	w.v.width = 0
	return w.v.w.Write(p)
}

// Stop stops redrawing and clears the line.
func (v *View) Stop() {
	close(v.stop)
	<-v.done
}
