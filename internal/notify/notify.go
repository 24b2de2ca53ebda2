// Package notify tells people how a run is going while it runs: each
// phase's and step's numbers posted to a Slack-compatible webhook and to one
// GitHub pull-request comment that is edited in place. Posts go out in the
// background, each target in its own queue, with retries and backoff; they
// never hold up the run, and a post that finally fails is a warning for the
// run's summary, never a silent drop.
package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Message is one thing worth telling: Slack reads Text; Fields carry the
// numbers for other receivers.
type Message struct {
	Text   string         `json:"text"`
	Event  string         `json:"event"` // phase, step, done
	Fields map[string]any `json:"fields,omitempty"`

	seq uint64 // the sender's order, so a cumulative target adds a message once
}

// Target is one place messages go.
type Target interface {
	// Name names the target in warnings; it holds no secret.
	Name() string
	// Deliver sends m. It is called again with the same m when it failed
	// with an error that is not Permanent.
	Deliver(ctx context.Context, m Message) error
}

// cumulative is a target whose every delivery carries all the messages
// before it (a comment rewritten in place): a later success makes up for
// an earlier failure.
type cumulative interface{ cumulative() }

// permanentError is a failure that trying again will not mend.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying (a refused token, a repository
// that does not exist).
func Permanent(err error) error { return permanentError{err} }

// retryAfterError asks for the next try no sooner than after.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e retryAfterError) Error() string { return e.err.Error() }
func (e retryAfterError) Unwrap() error { return e.err }

// Options say how hard a Sender tries. Zero fields take the defaults.
type Options struct {
	// Tries is how many times one message is tried (default 4).
	Tries int
	// Backoff is the wait before the second try, doubling up to MaxBackoff
	// (defaults 1 s and 30 s); a Retry-After asks for longer up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Timeout bounds each try (default 10 s).
	Timeout time.Duration
	// Queue is how many messages wait per target before new ones are
	// dropped (and counted) rather than hold up the run (default 256).
	Queue int
}

func (o Options) withDefaults() Options {
	if o.Tries <= 0 {
		o.Tries = 4
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = o.Backoff
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Queue <= 0 {
		o.Queue = 256
	}
	return o
}

// Sender posts messages to its targets in the background, in order, each
// target on its own so a slow one does not delay the others.
type Sender struct {
	lanes  []*lane
	mu     sync.Mutex
	seq    uint64
	closed bool
	stop   context.CancelFunc
	ctx    context.Context
}

// lane is one target's queue and what became of its posts.
type lane struct {
	t     Target
	o     Options
	queue chan Message
	done  chan struct{}

	mu      sync.Mutex
	posted  int    // messages delivered
	failed  int    // messages that failed every try
	lastErr string // the last failure's error
	dropped int    // messages dropped on a full queue
	unsent  int    // messages still queued or in a try when the run ended
	healed  bool   // a cumulative target delivered after its last failure
	// broken is set when a message failed every try: later ones get one
	// try each until one goes through, so a dead receiver costs one round
	// of backoff, not one per message.
	broken bool
}

// Start starts sending to targets.
func Start(o Options, targets ...Target) *Sender {
	o = o.withDefaults()
	ctx, stop := context.WithCancel(context.Background())
	s := &Sender{stop: stop, ctx: ctx}
	for _, t := range targets {
		l := &lane{t: t, o: o, queue: make(chan Message, o.Queue), done: make(chan struct{})}
		s.lanes = append(s.lanes, l)
		go l.run(ctx)
	}
	return s
}

// Post queues m for every target and returns at once; a target whose queue
// is full drops it, which Close reports.
func (s *Sender) Post(m Message) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.seq++
	m.seq = s.seq
	for _, l := range s.lanes {
		select {
		case l.queue <- m:
		default:
			l.mu.Lock()
			l.dropped++
			l.mu.Unlock()
		}
	}
}

// Close stops taking messages, waits until what is queued has been tried
// or ctx is done (then abandons the rest), and returns one warning per
// target that lost a message: failed every try, dropped on a full queue,
// or still queued when Close gave up. It is safe to call more than once;
// later calls return nothing.
func (s *Sender) Close(ctx context.Context) []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, l := range s.lanes {
		close(l.queue)
	}
	s.mu.Unlock()
	for _, l := range s.lanes {
		select {
		case <-l.done:
		case <-ctx.Done():
			s.stop() // abandon the tries in flight, the waits and the queue
			<-l.done
		}
	}
	s.stop()
	var out []string
	for _, l := range s.lanes {
		if w := l.warning(); w != "" {
			out = append(out, w)
		}
	}
	return out
}

func (l *lane) run(ctx context.Context) {
	defer close(l.done)
	for m := range l.queue {
		if ctx.Err() != nil {
			l.mu.Lock()
			l.unsent++ // abandoned when the run ended
			l.mu.Unlock()
			continue
		}
		l.mu.Lock()
		tries := l.o.Tries
		if l.broken {
			tries = 1
		}
		l.mu.Unlock()
		err := l.deliver(ctx, m, tries)
		l.mu.Lock()
		switch {
		case err != nil && ctx.Err() != nil:
			l.unsent++
			l.lastErr = err.Error()
		case err != nil:
			l.failed++
			l.lastErr = err.Error()
			l.healed = false
			l.broken = true
		default:
			l.posted++
			l.broken = false
			if l.failed > 0 {
				_, l.healed = l.t.(cumulative)
			}
		}
		l.mu.Unlock()
	}
}

// deliver tries m until it is delivered, fails permanently, has been tried
// tries times or ctx is done.
func (l *lane) deliver(ctx context.Context, m Message, tries int) error {
	wait := l.o.Backoff
	var err error
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
		err = l.t.Deliver(tctx, m)
		cancel()
		if err == nil {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) || try >= tries {
			if try > 1 {
				return fmt.Errorf("%w (after %d tries)", err, try)
			}
			return err
		}
		d := wait
		var ra retryAfterError
		if errors.As(err, &ra) && ra.after > d {
			d = min(ra.after, l.o.MaxBackoff)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (the run ended before try %d)", err, try+1)
		case <-t.C:
		}
		wait = min(2*wait, l.o.MaxBackoff)
	}
}

// warning says what the target lost; "" when it lost nothing.
func (l *lane) warning() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	// a cumulative target's last delivery carried the messages that failed
	if l.failed > 0 && !l.healed {
		parts = append(parts, fmt.Sprintf("%d of %d posts failed (last: %s)", l.failed, l.failed+l.posted+l.unsent, l.lastErr))
	}
	if l.dropped > 0 {
		parts = append(parts, fmt.Sprintf("%d messages dropped because posting fell behind the run", l.dropped))
	}
	if l.unsent > 0 {
		parts = append(parts, fmt.Sprintf("%d messages not sent when the run ended", l.unsent))
	}
	if len(parts) == 0 {
		return ""
	}
	return "notify: " + l.t.Name() + ": " + strings.Join(parts, "; ")
}

// classify turns an HTTP answer into an error: nil for 2xx, retryable for
// 408, 429 and 5xx (and a 403 that says it is rate limiting), Permanent for
// any other status. what names the request for the error.
func classify(resp *http.Response, what string) error {
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err := fmt.Errorf("%s answered HTTP %d", what, resp.StatusCode)
	limited := resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-RateLimit-Remaining") == "0"
	switch {
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode >= 500, resp.StatusCode == http.StatusForbidden && limited:
		if s := resp.Header.Get("Retry-After"); s != "" {
			if n, perr := strconv.Atoi(strings.TrimSpace(s)); perr == nil && n > 0 {
				return retryAfterError{err: err, after: time.Duration(n) * time.Second}
			}
		}
		return err
	}
	return Permanent(err)
}

// transportError is a failed round trip without the request's URL (a
// webhook's path is its secret): just what went wrong.
func transportError(what string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%s: %v", what, err)
}
