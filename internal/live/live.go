// Package live tells people how a run is going while it runs: a status line
// on the terminal, quiet when stderr is not a terminal or in CI, and an
// optional webhook that posts each phase's and step's numbers as they come
// (Slack-compatible JSON).
package live

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

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
	StepLeft         time.Duration // modelled time left in the step
	WindowLeft       time.Duration // modelled time left in the GPU window
}

// Line renders a status as one line.
func (s Status) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", s.Phase)
	if s.Step > 0 {
		fmt.Fprintf(&b, " | step %d/%d: %d sessions, %d in flight", s.Step, s.Steps, s.Sessions, s.InFlight)
	}
	if s.TTFTP90 > 0 {
		fmt.Fprintf(&b, " | P90 TTFT %.2fs", s.TTFTP90)
	}
	if s.InteractivityP90 > 0 {
		fmt.Fprintf(&b, " | P90 %.1f tok/s/user", s.InteractivityP90)
	}
	if s.StepLeft > 0 {
		fmt.Fprintf(&b, " | step left %s", s.StepLeft.Round(time.Second))
	}
	if s.WindowLeft > 0 {
		fmt.Fprintf(&b, " | window left %s", s.WindowLeft.Round(time.Minute))
	}
	return b.String()
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
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	width  int
}

// StartView starts redrawing status() on w every interval. Call Stop before
// printing anything else to w.
func StartView(w io.Writer, interval time.Duration, status func() Status) *View {
	v := &View{w: w, status: status, stop: make(chan struct{}), done: make(chan struct{})}
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
	line := v.status().Line()
	pad := ""
	if n := v.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(v.w, "\r%s%s", line, pad)
	v.width = len(line)
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

// Webhook posts messages to a Slack-compatible incoming webhook.
type Webhook struct {
	URL    string
	Client *http.Client
}

// Message is the JSON posted: Slack reads text; the fields carry the numbers
// for other receivers.
type Message struct {
	Text   string         `json:"text"`
	Event  string         `json:"event"` // phase, step, done
	Fields map[string]any `json:"fields,omitempty"`
}

// Post sends one message; a webhook that fails is reported, never fatal to
// the run.
func (h Webhook) Post(ctx context.Context, m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c := h.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook: %s answered HTTP %d", h.URL, resp.StatusCode)
	}
	return nil
}
