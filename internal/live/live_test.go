package live

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
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

func TestWebhookPostsSlackJSON(t *testing.T) {
	var got []Message
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m Message
		if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &m) != nil {
			http.Error(w, "bad", 400)
			return
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	defer srv.Close()
	h := Webhook{URL: srv.URL}
	if err := h.Post(context.Background(), Message{Text: "step 2: 4 sessions pass", Event: "step", Fields: map[string]any{"sessions": 4}}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Text != "step 2: 4 sessions pass" || got[0].Fields["sessions"] != float64(4) {
		t.Errorf("receiver got %+v", got)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 500) }))
	defer bad.Close()
	if err := (Webhook{URL: bad.URL}).Post(context.Background(), Message{Text: "x"}); err == nil {
		t.Error("a 500 from the webhook was not reported")
	}
}
