package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/headroom-bench/headroom/internal/timescale"
)

// Faults are the failures the simulator injects on demand, so a rehearsal
// can check that the rig notices each one. The zero value injects nothing.
// Windows are in modelled seconds counted from when the faults are set (the
// simulator's creation for Options.Faults, the request for POST
// /admin/faults).
type Faults struct {
	// Crash kills the engine at at_s: open streams are cut, and connections
	// are refused (with Start the listener closes) for for_s; then a fresh
	// engine comes back with an empty queue, a cold cache and every counter
	// at zero, as a restarted process would.
	Crash *Window `json:"crash,omitempty"`
	// Stall stops the engine stepping from at_s for for_s: streams get no
	// tokens and new requests queue. Latency metrics show the stall.
	Stall *Window `json:"stall,omitempty"`
	// NotReady is a slow start: for the window /health answers 503 and
	// /v1/models, /tokenize and chat completions are refused with 503.
	NotReady *Window `json:"not_ready,omitempty"`
	// MissingMetrics are metric families left out of /metrics (by name, such
	// as "vllm:time_to_first_token_seconds").
	MissingMetrics []string `json:"missing_metrics,omitempty"`
	// MetricsGone makes /metrics answer 404.
	MetricsGone bool `json:"metrics_gone,omitempty"`
	// Refuse answers a share of chat requests with an error status instead
	// of serving them.
	Refuse *Refusals `json:"refuse,omitempty"`
	// IgnoreDisconnects keeps a client's disconnect from reaching the engine:
	// abandoned requests keep generating and hold their batch slot and KV
	// blocks until they finish.
	IgnoreDisconnects bool `json:"ignore_disconnects,omitempty"`
	// Model serves another model id than the profile's (the wrong model
	// live): /v1/models lists it and requests for the profile's model get 404.
	Model string `json:"model,omitempty"`
	// MaxModelLen serves another context length than the profile's (the
	// wrong recipe live).
	MaxModelLen int `json:"max_model_len,omitempty"`
	// MalformedToolCallsAbove, when positive, truncates the arguments of a
	// tool call (so they fail its schema) when more than this many requests
	// are in the engine as the call's first token is sampled: tool calls
	// that break only under load.
	MalformedToolCallsAbove int `json:"malformed_tool_calls_above,omitempty"`
	// KVCapacityTokens, when positive and below the profile's, shrinks the
	// usable KV cache to this many tokens: the engine pins the other blocks
	// as they come free, so the cache fills, requests preempt and queue, and
	// the usage gauge reads near 1.
	KVCapacityTokens int `json:"kv_capacity_tokens,omitempty"`
	// KVShrink, when set, limits kv_capacity_tokens to this window, so the
	// cache fills mid-step, as a rehearsal needs; without it the shrink lasts
	// from when the faults are set.
	KVShrink *Window `json:"kv_shrink,omitempty"`
}

// Window is a span of modelled time: it starts at_s after the faults are set
// and lasts for_s.
type Window struct {
	AtSeconds  float64 `json:"at_s"`
	ForSeconds float64 `json:"for_s"`
}

// Refusals answer a share of chat requests with Status: 400 (context too
// long, in vLLM's words), 429 (too many requests) or 503 (overloaded).
type Refusals struct {
	Share  float64 `json:"share"`
	Status int     `json:"status"`
}

// ParseFaults reads faults from JSON, refusing unknown fields, and checks
// them.
func ParseFaults(data []byte) (Faults, error) {
	var f Faults
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Faults{}, fmt.Errorf("sim faults: %w; see the Faults fields in docs/simulator.md", err)
	}
	if dec.More() {
		return Faults{}, errors.New("sim faults: trailing data after the JSON object")
	}
	return f, f.Validate()
}

// Validate reports the first fault that cannot be injected.
func (f Faults) Validate() error {
	for _, w := range []struct {
		name string
		w    *Window
	}{{"crash", f.Crash}, {"stall", f.Stall}, {"not_ready", f.NotReady}, {"kv_shrink", f.KVShrink}} {
		if w.w == nil {
			continue
		}
		if !(w.w.AtSeconds >= 0) || !(w.w.ForSeconds > 0) {
			return fmt.Errorf("sim faults: %s window at_s %g for_s %g: at_s must be >= 0 and for_s > 0", w.name, w.w.AtSeconds, w.w.ForSeconds)
		}
	}
	if r := f.Refuse; r != nil {
		if !(r.Share >= 0 && r.Share <= 1) {
			return fmt.Errorf("sim faults: refuse.share is %g: give a fraction in [0, 1]", r.Share)
		}
		switch r.Status {
		case http.StatusBadRequest, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		default:
			return fmt.Errorf("sim faults: refuse.status is %d: use 400, 429 or 503", r.Status)
		}
	}
	if f.KVShrink != nil && f.KVCapacityTokens <= 0 {
		return errors.New("sim faults: kv_shrink is a window for kv_capacity_tokens: set kv_capacity_tokens too")
	}
	if f.MaxModelLen < 0 || f.MalformedToolCallsAbove < 0 || f.KVCapacityTokens < 0 {
		return errors.New("sim faults: max_model_len, malformed_tool_calls_above and kv_capacity_tokens must not be negative")
	}
	return nil
}

// faultState is a set of faults with its windows placed on the modelled
// timeline. It is immutable once stored.
type faultState struct {
	f       Faults
	setAt   time.Duration
	profile Profile // the profile served under these faults
	missing map[string]bool

	stallAt, stallEnd       time.Duration
	notReadyAt, notReadyEnd time.Duration
	crashAt, crashEnd       time.Duration
	kvAt, kvEnd             time.Duration
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (s *Sim) newFaultState(f Faults, now time.Duration) (*faultState, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	fs := &faultState{f: f, setAt: now, profile: s.prof, missing: map[string]bool{}}
	if f.Model != "" {
		fs.profile.Model = f.Model
	}
	if f.MaxModelLen > 0 {
		fs.profile.MaxModelLen = f.MaxModelLen
		if err := fs.profile.Validate(); err != nil {
			return nil, fmt.Errorf("sim faults: max_model_len %d: %w", f.MaxModelLen, err)
		}
	}
	for _, m := range f.MissingMetrics {
		fs.missing[m] = true
	}
	place := func(w *Window) (time.Duration, time.Duration) {
		if w == nil {
			return 0, 0
		}
		at := now + seconds(w.AtSeconds)
		return at, at + seconds(w.ForSeconds)
	}
	fs.stallAt, fs.stallEnd = place(f.Stall)
	fs.notReadyAt, fs.notReadyEnd = place(f.NotReady)
	fs.crashAt, fs.crashEnd = place(f.Crash)
	fs.kvAt, fs.kvEnd = place(f.KVShrink)
	return fs, nil
}

// kvCapacity is the KV cache, in tokens, the faults leave the engine at
// modelled time t; 0 when they leave it whole.
func (fs *faultState) kvCapacity(t time.Duration) int {
	if fs.f.KVShrink != nil && (t < fs.kvAt || t >= fs.kvEnd) {
		return 0
	}
	return fs.f.KVCapacityTokens
}

// stalled reports whether modelled time t falls in the stall window.
func (fs *faultState) stalled(t time.Duration) bool {
	return fs.f.Stall != nil && t >= fs.stallAt && t < fs.stallEnd
}

// notReady reports whether modelled time t falls in the slow-start window.
func (fs *faultState) notReady(t time.Duration) bool {
	return fs.f.NotReady != nil && t >= fs.notReadyAt && t < fs.notReadyEnd
}

// refuse says whether chat request number k is refused, deterministically
// from the seed.
func (fs *faultState) refuse(seed, k uint64) bool {
	r := fs.f.Refuse
	if r == nil || r.Share <= 0 {
		return false
	}
	u := float64(mix64(seed^k*0x9e3779b97f4a7c15^0xfa175)>>11) / (1 << 53)
	return u < r.Share
}

// armFaults starts the timer of a crash fault, if any. The crash waits for
// gate (when not nil) to close, so the admin request that asked for it gets
// its answer before connections drop.
func (s *Sim) armFaults(fs *faultState, gate *timescale.Signal) {
	if fs.f.Crash == nil {
		return
	}
	ctx, cancel := s.clock.WithCancel(s.closeCtx)
	s.faultStop = cancel
	s.clock.Go(func() {
		if gate != nil {
			if _, err := s.clock.WaitFor(ctx, "sim fault gate", -1, gate); err != nil {
				return
			}
		}
		if s.clock.SleepUntil(ctx, fs.crashAt) == nil {
			s.crash(fs.crashEnd)
		}
	})
}

// stopFaults cancels a pending crash timer.
func (s *Sim) stopFaults() {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if s.faultStop != nil {
		s.faultStop()
		s.faultStop = nil
	}
}

// SetFaults replaces the faults in force; the zero Faults clears them. A
// change of served model or context length redeploys the engine at once (a
// restart with counters at zero). A crash already under way runs its course.
func (s *Sim) SetFaults(f Faults) error { return s.setFaults(f, nil) }

func (s *Sim) setFaults(f Faults, gate *timescale.Signal) error {
	fs, err := s.newFaultState(f, s.clock.Now())
	if err != nil {
		return err
	}
	s.stopFaults()
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.faults.Store(fs)
	s.armFaults(fs, gate)
	l := s.life.Load()
	if l.prof.Model != fs.profile.Model || l.prof.MaxModelLen != fs.profile.MaxModelLen {
		if l.up.Load() && !s.down.Load() {
			// A redeploy: back at once with the new identity, after the
			// admin answer is out.
			s.clock.Go(func() {
				if gate != nil {
					_, _ = s.clock.WaitFor(context.Background(), "sim fault gate", -1, gate)
				}
				s.crash(s.clock.Now())
			})
		} else if !s.down.Load() {
			s.life.Store(s.newLife(fs.profile)) // not running yet
		}
	}
	l.poke() // stalls and KV pins are read by the engine
	return nil
}

// Faults returns the faults in force.
func (s *Sim) Faults() Faults { return s.faults.Load().f }

// admin serves /admin/faults: GET shows the faults in force, POST replaces
// them. Only loopback peers may use it.
func (s *Sim) admin(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		writeError(w, http.StatusForbidden, "the admin endpoint answers only loopback clients (127.0.0.1 or ::1)")
		return
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			writeError(w, http.StatusBadRequest, "reading the faults: "+err.Error())
			return
		}
		f, err := ParseFaults(body)
		gate := s.clock.NewLatch()
		defer gate.Close()
		if err == nil {
			err = s.setFaults(f, gate)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	fs := s.faults.Load()
	b, _ := json.Marshal(struct {
		Faults  Faults  `json:"faults"`
		SetAtS  float64 `json:"set_at_s"`
		NowS    float64 `json:"now_s"`
		Model   string  `json:"model"`
		Context int     `json:"max_model_len"`
	}{fs.f, fs.setAt.Seconds(), s.clock.Now().Seconds(), fs.profile.Model, fs.profile.MaxModelLen})
	// Send the whole answer now, so a crash it arms cannot cut it off.
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	_ = http.NewResponseController(w).Flush()
}
