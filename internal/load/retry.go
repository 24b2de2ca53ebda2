package load

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy is how a lane gets past what a real agent gets past: a turn
// that failed to connect, timed out, or was answered 429, 408, 409 or 5xx is
// tried again after a wait, each failed try a record (and an error) of its
// own. The conversation ends only when its attempts run out or on what no
// retry helps (a refusal such as 400 context too long, a broken stream).
//
// The wait after a lane's k-th consecutive failure is drawn from
// [w/2, w] with w = min(Max, Base*2^(k-1)) ("equal jitter"), and is never
// shorter than the server's Retry-After, itself capped at Max. The count
// runs over the lane's requests, not one turn's: a lane whose conversation
// ran out of attempts waits again before its next conversation, so an
// endpoint that turns everything away sees each lane's requests thin out
// to one per Max/2 at most, instead of a storm of new sessions.
type RetryPolicy struct {
	// Attempts is the most tries one turn gets, the first included: 1 never
	// retries. 0 means DefaultRetry's.
	Attempts int
	// Base is the longest wait after a lane's first consecutive failure; it
	// doubles with each further one, up to Max. 0 means DefaultRetry's.
	Base time.Duration
	Max  time.Duration
}

// DefaultRetry is the policy a Generator uses when Options.Retry is left
// zero: 4 attempts, waits from 1 s doubling to 30 s, as agent SDKs retry
// (OpenAI's retries 2 times from 0.5 s to 8 s; agents wrap it in more).
func DefaultRetry() RetryPolicy {
	return RetryPolicy{Attempts: 4, Base: time.Second, Max: 30 * time.Second}
}

// orDefault fills the zero fields of p from DefaultRetry.
func (p RetryPolicy) orDefault() RetryPolicy {
	d := DefaultRetry()
	if p.Attempts <= 0 {
		p.Attempts = d.Attempts
	}
	if p.Base <= 0 {
		p.Base = d.Base
	}
	if p.Max <= 0 {
		p.Max = max(d.Max, p.Base)
	}
	p.Max = max(p.Max, p.Base)
	return p
}

// delay is the wait after a lane's k-th consecutive failure (k >= 1), in
// modelled time: u in [0, 1) is the jitter, after the server's Retry-After
// (0 when it sent none).
func (p RetryPolicy) delay(k int, u float64, after time.Duration) time.Duration {
	full := p.Max
	if k >= 1 && k <= 40 {
		if w := p.Base << (k - 1); w > 0 && w < p.Max {
			full = w
		}
	}
	d := full/2 + time.Duration(u*float64(full-full/2))
	if after > 0 {
		d = max(d, min(after, p.Max))
	}
	return d
}

// retryable reports whether a real agent would try the request again: it
// never reached the server, timed out, broke before any answer, or the
// server said to come back (408, 409, 429, 5xx).
func retryable(r Record) bool {
	switch r.Error {
	case ErrConnect, ErrTimeout, ErrServer:
		return true
	case ErrStream:
		return r.Status == 0 // the connection broke before an answer
	case ErrRefused:
		switch r.Status {
		case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
			return true
		}
	}
	return false
}

// retryAfter is the wait a response's Retry-After header asks for, 0 when
// it has none or one that does not parse. An HTTP-date is read against the
// response's own Date header when it has one, so the two clocks need not
// agree. The wait is taken as modelled time: a server on the modelled clock
// (the simulator) speaks it, and at time scale 1 it is wall time.
func retryAfter(h http.Header) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	now := time.Now()
	if t, err := http.ParseTime(h.Get("Date")); err == nil {
		now = t
	}
	d, _ := parseRetryAfter(v, now)
	return d
}

// parseRetryAfter reads a Retry-After value, whole seconds or an HTTP-date
// (a date in the past means now); ok is false when it is neither.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// try sends turn i of a play, trying it again after a wait while the
// failure is one a retry gets past and attempts are left. It returns the
// last try's record: failed when the conversation cannot go on. next is
// the turn the play sends after it (-1 for none), read ahead where the
// transport can (Generator.readAhead).
func (g *Generator) try(l *lane, s Session, marker uint64, play, i, next int) Record {
	for attempt := 0; ; attempt++ {
		rec, after := g.send(l, s, marker, play, i, "", attempt, next)
		if !rec.Failed() {
			l.streak.Store(0)
			return rec
		}
		if rec.Error == ErrAborted {
			return rec
		}
		if !retryable(rec) {
			// a refusal ends the conversation; the lane still waits before
			// its next one, so an endpoint that refuses everything (a 400
			// for every request) sees a bounded number of requests, not a
			// storm of new conversations
			l.streak.Add(1)
			return rec
		}
		k := l.streak.Add(1)
		if attempt+1 >= g.retry.Attempts || g.stopped(l) {
			// out of tries: the lane waits before its next conversation
			return rec
		}
		if g.backoff(l, k, after) != nil {
			return rec // the lane was stopped while it waited
		}
	}
}

// backoff waits, on the generator's clock, what the retry policy says after
// the lane's k-th consecutive failure; it ends early, with an error, when
// the lane is stopped.
func (g *Generator) backoff(l *lane, k int64, after time.Duration) error {
	h := mix64(g.o.Seed ^ l.start<<40 ^ l.backoffs.Add(1))
	u := float64(h>>11) / (1 << 53)
	return g.o.Clock.Sleep(l.ctx, g.retry.delay(int(min(k, 64)), u, after))
}

// mix64 is SplitMix64's finaliser: a well-spread hash of x.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
