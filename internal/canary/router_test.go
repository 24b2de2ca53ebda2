package canary

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-bench/headroom/internal/timescale"
)

// sideServer answers every request with its side's name and counts them
// by session key (the request's first message).
type sideServer struct {
	name string
	mu   sync.Mutex
	got  map[string]int
	// hold, when set, is waited on after the answer's first byte.
	hold chan struct{}
	// started is closed once a held answer has begun.
	started chan struct{}
}

func newSideServer(name string) *sideServer { return &sideServer{name: name, got: map[string]int{}} }

func (s *sideServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.got[string(b)]++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, s.name)
	if s.hold != nil {
		w.(http.Flusher).Flush()
		close(s.started)
		<-s.hold
		_, _ = io.WriteString(w, " done")
	}
}

func (s *sideServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.got {
		n += v
	}
	return n
}

func chatBody(session string, turn int) string {
	// a growing conversation: the same first message, more after it
	var msgs []string
	msgs = append(msgs, `{"role":"system","content":"You are a coding agent."}`, fmt.Sprintf(`{"role":"user","content":"task of %s"}`, session))
	for i := range turn {
		msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"step %d"}`, i), fmt.Sprintf(`{"role":"user","content":"result %d"}`, i))
	}
	return `{"model":"m","messages":[` + strings.Join(msgs, ",") + `],"stream":true}`
}

func send(t *testing.T, h http.Handler, body string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Body.String()
}

func newTestRouter(t *testing.T) (*Router, *sideServer, *sideServer) {
	t.Helper()
	clock, err := timescale.New(1)
	if err != nil {
		t.Fatal(err)
	}
	b, c := newSideServer("baseline"), newSideServer("candidate")
	rt, err := NewRouter(RouterOptions{Clock: clock, Baseline: b, Candidate: c})
	if err != nil {
		t.Fatal(err)
	}
	return rt, b, c
}

// TestRouterKeepsSessionsWhole: every turn of a conversation goes where
// its first went, whatever the share does later; new sessions split by
// the share in force when they begin.
func TestRouterKeepsSessionsWhole(t *testing.T) {
	rt, _, _ := newTestRouter(t)
	rt.SetShare(0.25)
	side := map[string]string{}
	for s := range 8 {
		id := fmt.Sprintf("a%d", s)
		side[id] = send(t, rt, chatBody(id, 0))
	}
	n := 0
	for _, v := range side {
		if v == "candidate" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d of 8 sessions went to the candidate at a share of 0.25, want 2", n)
	}
	rt.SetShare(1)
	for turn := 1; turn <= 3; turn++ {
		for id, want := range side {
			if got := send(t, rt, chatBody(id, turn)); got != want {
				t.Fatalf("session %s turn %d went to the %s, its first turn to the %s", id, turn, got, want)
			}
		}
	}
	if got := send(t, rt, chatBody("new", 0)); got != "candidate" {
		t.Fatalf("a new session at share 1 went to the %s", got)
	}
	snap := rt.Snapshot()
	if snap.Counts[Baseline].Sessions != 6 || snap.Counts[Candidate].Sessions != 3 || snap.Counts[Baseline].Requests+snap.Counts[Candidate].Requests != 8*4+1 {
		t.Fatalf("counts %+v: want 6 baseline and 3 candidate sessions, 33 requests", snap.Counts)
	}
}

// TestRouterRollbackLetsStreamsFinish: a stream in flight on the candidate
// when the canary rolls back ends there, whole; the session's next turn
// goes to the baseline, as do new sessions.
func TestRouterRollbackLetsStreamsFinish(t *testing.T) {
	rt, b, c := newTestRouter(t)
	rt.SetShare(1)
	c.hold, c.started = make(chan struct{}), make(chan struct{})
	done := make(chan string)
	go func() { done <- send(t, rt, chatBody("x", 0)) }()
	<-c.started
	rt.Rollback()
	if s := rt.Snapshot(); s.InFlight[Candidate] != 1 || s.Share != 0 {
		t.Fatalf("after the rollback: %+v, want one request in flight on the candidate and share 0", s)
	}
	close(c.hold)
	if got := <-done; got != "candidate done" {
		t.Fatalf("the stream in flight answered %q, want the candidate's whole answer", got)
	}
	c.hold = nil
	if got := send(t, rt, chatBody("x", 1)); got != "baseline" {
		t.Fatalf("the session's next turn went to the %s after the rollback", got)
	}
	rt.SetShare(1) // a rolled-back canary stays rolled back
	if got := send(t, rt, chatBody("y", 0)); got != "baseline" {
		t.Fatalf("a new session went to the %s after the rollback", got)
	}
	if c.count() != 1 || b.count() != 2 {
		t.Fatalf("candidate served %d, baseline %d: want 1 and 2", c.count(), b.count())
	}
	if s := rt.Snapshot(); s.InFlight != [2]int{} || s.Counts[Candidate].Finished != 1 {
		t.Fatalf("at the end: %+v", s)
	}
}

// TestRouterOtherRequestsGoToBaseline: /v1/models and the like are today's.
func TestRouterOtherRequestsGoToBaseline(t *testing.T) {
	rt, _, _ := newTestRouter(t)
	rt.SetShare(1)
	req := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	rec := httptest.NewRecorder()
	rt.ServeHTTP(rec, req)
	if rec.Body.String() != "baseline" {
		t.Fatalf("GET /v1/models went to the %s", rec.Body.String())
	}
}

// TestSessionKey: a conversation's turns and the subagents it forks share a
// key; another conversation, or another header value, does not.
func TestSessionKey(t *testing.T) {
	var s Sessions
	key := func(h http.Header, body string) uint64 {
		k, ok := s.Key(h, []byte(body))
		if !ok {
			t.Fatalf("no key for %s", body)
		}
		return k
	}
	a0, a3 := key(nil, chatBody("a", 0)), key(nil, chatBody("a", 3))
	if a0 != a3 {
		t.Error("a conversation's later turn has another key than its first")
	}
	fork := `{"messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"task of a"},{"role":"assistant","content":"spawning"},{"role":"user","content":"subtask"}]}`
	if key(nil, fork) != a0 {
		t.Error("a subagent forked from the conversation has another key")
	}
	if key(nil, chatBody("b", 0)) == a0 {
		t.Error("two conversations share a key")
	}
	s.Header = "X-Session-Id"
	h1, h2 := http.Header{"X-Session-Id": {"one"}}, http.Header{"X-Session-Id": {"two"}}
	if key(h1, chatBody("a", 0)) == key(h2, chatBody("a", 0)) {
		t.Error("two session ids in the header share a key")
	}
	if key(h1, chatBody("a", 0)) != key(h1, chatBody("b", 5)) {
		t.Error("one session id in the header gave two keys")
	}
	if _, ok := s.Key(nil, nil); ok {
		t.Error("an empty request without the header has a key")
	}
}
