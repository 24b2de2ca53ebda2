package rig

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/live"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/transport"
)

// notifier posts to the run's webhook in the background, in order; a
// failing webhook becomes a warning, never a failed run.
type notifier struct {
	hook   live.Webhook
	queue  chan live.Message
	done   chan struct{}
	mu     sync.Mutex
	failed []string
	redact *transport.Redactor // set before the first post
}

// redacting makes every later post and failure pass through r.
func (n *notifier) redacting(r *transport.Redactor) {
	if n != nil {
		n.redact = r
	}
}

func newNotifier(url string) *notifier {
	if url == "" {
		return nil
	}
	n := &notifier{hook: live.Webhook{URL: url}, queue: make(chan live.Message, 64), done: make(chan struct{})}
	go func() {
		defer close(n.done)
		for m := range n.queue {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := n.hook.Post(ctx, m); err != nil {
				n.mu.Lock()
				n.failed = append(n.failed, n.redact.String(err.Error()))
				n.mu.Unlock()
			}
			cancel()
		}
	}()
	return n
}

func (n *notifier) post(m live.Message) {
	if n == nil {
		return
	}
	m.Text = n.redact.String(m.Text)
	for k, v := range m.Fields {
		if s, ok := v.(string); ok {
			m.Fields[k] = n.redact.String(s)
		}
	}
	select {
	case n.queue <- m:
	default: // a stuck webhook must not hold up the run
	}
}

// close sends what is queued and stops.
func (n *notifier) close() {
	if n == nil {
		return
	}
	close(n.queue)
	<-n.done
}

func stepMessage(recipe string, s sweep.StepResult) live.Message {
	text := fmt.Sprintf("%s: step %d, %d sessions: %s", recipe, s.Index+1, s.Sessions, s.Judged.Verdict)
	fields := map[string]any{"recipe": recipe, "step": s.Index + 1, "sessions": s.Sessions, "verdict": s.Judged.Verdict}
	for _, p := range s.Judged.Parts {
		text += fmt.Sprintf("; %s %s %.3g (%.3g-%.3g)", p.Name, p.Verdict, p.Value.Center, p.Value.Lo, p.Value.Hi)
		fields[p.Name] = map[string]any{"verdict": p.Verdict, "value": p.Value}
	}
	return live.Message{Text: text, Event: "step", Fields: fields}
}

// lastWindowP90s are the running P90s the live view shows: the last
// window's TTFT and interactivity, 0 when not known yet.
func lastWindowP90s(samples []signal.Sample, window time.Duration) (ttft, inter float64) {
	if len(samples) < 2 {
		return 0, 0
	}
	end := samples[len(samples)-1].At
	ws := signal.Windows(samples, max(0, end-window), end, window)
	if len(ws) == 0 {
		return 0, 0
	}
	w := ws[len(ws)-1]
	if h, ok := w.Hist[signal.TTFT]; ok {
		if v, _, _, ok := h.Quantile(0.9); ok {
			ttft = v
		}
	}
	if h, ok := w.Hist[signal.TPOT]; ok {
		if v, _, _, ok := h.Quantile(0.9); ok && v > 0 {
			inter = 1 / v
		}
	}
	return ttft, inter
}

// nanIfZero marks an unknown running value (0) as missing for telemetry.
func nanIfZero(v float64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return v
}
