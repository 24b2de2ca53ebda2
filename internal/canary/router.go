package canary

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/timescale"
)

// The two sides of a canary.
const (
	Baseline  = 0 // today's recipe
	Candidate = 1 // the recipe on trial
)

// SideName names a side in reports.
func SideName(side int) string {
	if side == Candidate {
		return "candidate"
	}
	return "baseline"
}

// maxBody bounds a chat request the router reads to key it (the recording
// proxy's own capture limit).
const maxBody = 64 << 20

// Observation is what the router saw of one chat request on one side:
// the client's view of it, for the intervals to carry which sessions the
// canary drew (verdict.Request) and for the counts.
type Observation struct {
	Session string
	// Arrival, First and End are modelled times: the request came in, the
	// answer's first byte went out, the answer ended (First is 0 when no
	// byte came).
	Arrival, First, End time.Duration
	Status              int
	// NotReached is a request whose side could not be reached (the
	// recording proxy answered 502 itself).
	NotReached bool
}

// Counts are a side's chat requests so far.
type Counts struct {
	Requests   int `json:"requests"`    // chat requests routed to the side
	Finished   int `json:"finished"`    // of them, those whose answer ended (any status)
	NotReached int `json:"not_reached"` // of them, those the side never got
	Sessions   int `json:"sessions"`    // sessions that began on the side
}

// Router splits whole sessions between the baseline and the candidate by
// a weight, and keeps every session on the side it began on: a new session
// goes to the candidate while the candidate's share of the sessions begun
// at the current weight is below the weight; every later request of a
// session goes where its first went. A request in flight finishes where it
// started whatever the weight does. After Rollback every request goes to
// the baseline, the candidate's sessions included (they lose their cache;
// the candidate missed). Requests other than chat completions (/v1/models,
// /tokenize) go to the baseline.
type Router struct {
	clock    *timescale.Clock
	sessions Sessions
	sides    [2]http.Handler
	idle     time.Duration

	mu         sync.Mutex
	share      float64
	rolledBack bool
	live       map[uint64]*session
	begun      [2]int // sessions begun on each side at the current weight
	counts     [2]Counts
	inFlight   [2]int
	obs        [2][]Observation
}

type session struct {
	side int
	last time.Duration // the latest request's arrival
	id   string
}

// RouterOptions configure a Router.
type RouterOptions struct {
	Clock *timescale.Clock
	// Baseline and Candidate serve each side: the recording proxy in front
	// of its engine (record.Recorder.Handler).
	Baseline, Candidate http.Handler
	Sessions            Sessions
	// Idle is how long a session may go without a request before it is
	// forgotten (its next request is a new session); 0 means 30 minutes.
	Idle time.Duration
}

// NewRouter returns a router with the candidate's share at 0.
func NewRouter(o RouterOptions) (*Router, error) {
	if o.Clock == nil || o.Baseline == nil || o.Candidate == nil {
		return nil, fmt.Errorf("canary: a router needs a clock and both sides' handlers")
	}
	if o.Idle <= 0 {
		o.Idle = 30 * time.Minute
	}
	return &Router{clock: o.Clock, sessions: o.Sessions, sides: [2]http.Handler{o.Baseline, o.Candidate}, idle: o.Idle, live: map[uint64]*session{}}, nil
}

// SetShare sets the candidate's share of new sessions (0 to 1). The
// sessions already begun stay where they are.
func (rt *Router) SetShare(share float64) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.rolledBack {
		return
	}
	rt.share = min(1, max(0, share))
	rt.begun = [2]int{}
}

// Rollback sends every request from now on to the baseline, those of the
// candidate's sessions included; requests in flight on the candidate end
// there.
func (rt *Router) Rollback() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.rolledBack, rt.share = true, 0
	for _, s := range rt.live {
		s.side = Baseline
	}
}

// Share is the candidate's share of new sessions now.
func (rt *Router) Share() float64 {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.share
}

// Snapshot is the router's state at one moment.
type Snapshot struct {
	Share    float64   `json:"share"`
	Live     [2]int    `json:"live_sessions"` // sessions not idle past RouterOptions.Idle, by side
	InFlight [2]int    `json:"in_flight"`
	Counts   [2]Counts `json:"counts"`
}

// Snapshot reports the router's state and forgets sessions idle past Idle.
func (rt *Router) Snapshot() Snapshot {
	now := rt.clock.Now()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	s := Snapshot{Share: rt.share, InFlight: rt.inFlight, Counts: rt.counts}
	for k, ss := range rt.live {
		if now-ss.last > rt.idle {
			delete(rt.live, k)
			continue
		}
		s.Live[ss.side]++
	}
	return s
}

// Observations returns a copy of one side's observations whose arrival is
// at or after from.
func (rt *Router) Observations(side int, from time.Duration) []Observation {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []Observation
	for _, o := range rt.obs[side] {
		if o.Arrival >= from {
			out = append(out, o)
		}
	}
	return out
}

// Forget drops the observations that arrived before t: a share step's
// judged time begins at t, and nothing before it is read again.
func (rt *Router) Forget(t time.Duration) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for side, obs := range rt.obs {
		k := 0
		for _, o := range obs {
			if o.Arrival >= t {
				obs[k] = o
				k++
			}
		}
		clear(obs[k:])
		rt.obs[side] = obs[:k]
	}
}

// pick is the side of a request of session key arriving at now.
func (rt *Router) pick(key uint64, keyed bool, now time.Duration) (side int, id string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if keyed {
		if s := rt.live[key]; s != nil && now-s.last <= rt.idle {
			s.last = now
			rt.counts[s.side].Requests++
			rt.inFlight[s.side]++
			return s.side, s.id
		}
	}
	side = Baseline
	total := rt.begun[Baseline] + rt.begun[Candidate]
	if !rt.rolledBack && rt.share > 0 && float64(rt.begun[Candidate]+1) <= rt.share*float64(total+1)+1e-9 {
		side = Candidate
	}
	rt.begun[side]++
	rt.counts[side].Sessions++
	rt.counts[side].Requests++
	rt.inFlight[side]++
	id = fmt.Sprintf("s%d", rt.counts[Baseline].Sessions+rt.counts[Candidate].Sessions)
	if keyed {
		rt.live[key] = &session{side: side, last: now, id: id}
	}
	return side, id
}

func (rt *Router) done(side int, o Observation) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.inFlight[side]--
	rt.counts[side].Finished++
	if o.NotReached {
		rt.counts[side].NotReached++
	}
	rt.obs[side] = append(rt.obs[side], o)
}

// observedKey carries a request's observation to the transport, which
// marks a side that could not be reached.
type observedKey struct{}

// ServeHTTP routes one request.
func (rt *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || !strings.HasSuffix(strings.TrimSuffix(req.URL.Path, "/"), "/chat/completions") {
		rt.sides[Baseline].ServeHTTP(w, req)
		return
	}
	now := rt.clock.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	_ = req.Body.Close()
	if err != nil {
		http.Error(w, "headroom canary: reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxBody {
		http.Error(w, fmt.Sprintf("headroom canary: the request is over %d MiB", maxBody>>20), http.StatusRequestEntityTooLarge)
		return
	}
	key, keyed := rt.sessions.Key(req.Header, body)
	side, id := rt.pick(key, keyed, now)
	o := &Observation{Session: id, Arrival: now}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	sw := &observingWriter{ResponseWriter: w, clock: rt.clock, o: o}
	out := req.WithContext(context.WithValue(req.Context(), observedKey{}, o))
	rt.sides[side].ServeHTTP(sw, out)
	// A transport that reads no further than the body's length (an
	// in-memory one) never shows the recording proxy its end: closing it
	// does, so the exchange is recorded.
	_ = out.Body.Close()
	o.End = rt.clock.Now()
	if o.Status == 0 {
		o.Status = http.StatusOK
	}
	rt.done(side, *o)
}

// observingWriter stamps the answer's status and first byte.
type observingWriter struct {
	http.ResponseWriter
	clock *timescale.Clock
	o     *Observation
}

func (w *observingWriter) WriteHeader(code int) {
	if w.o.Status == 0 {
		w.o.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *observingWriter) Write(b []byte) (int, error) {
	if w.o.Status == 0 {
		w.o.Status = http.StatusOK
	}
	if len(b) > 0 && w.o.First == 0 {
		w.o.First = w.clock.Now()
	}
	return w.ResponseWriter.Write(b)
}

func (w *observingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *observingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// MarkUnreached wraps a side's transport so that a request it cannot
// deliver (no connection) is counted as not reached, not as the side's
// error: the recording proxy answers such a request 502 itself.
func MarkUnreached(rt http.RoundTripper) http.RoundTripper { return unreached{rt} }

type unreached struct{ rt http.RoundTripper }

func (u unreached) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := u.rt.RoundTrip(req)
	if err != nil && req.Context().Err() == nil {
		if o, ok := req.Context().Value(observedKey{}).(*Observation); ok {
			o.NotReached = true
		}
	}
	return resp, err
}
