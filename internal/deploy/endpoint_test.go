package deploy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestServing(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		err    string // substring; "" means serving
	}{
		// The model is listed.
		{"listed", 200, `{"object":"list","data":[{"id":"other"},{"id":"glm"}]}`, ""},
		// Up, but serving another model.
		{"other model", 200, `{"data":[{"id":"other"}]}`, `lists [other], not model "glm"`},
		// Not up yet.
		{"503", 503, `loading`, "503"},
		// Not an OpenAI server.
		{"not json", 200, `<html>`, "not an OpenAI model list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/models" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(c.status)
				w.Write([]byte(c.body))
			}))
			defer srv.Close()
			err := Serving(context.Background(), srv.Client(), srv.URL+"/", "glm")
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("Serving = %v, want %q", err, c.err)
			}
		})
	}
}

func TestWaitServingOverHTTP(t *testing.T) {
	// The endpoint lists the model from its fourth answer on.
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 4 {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"data":[{"id":"glm"}]}`))
	}))
	defer srv.Close()
	if err := WaitServing(context.Background(), srv.Client(), srv.URL, "glm", time.Millisecond); err != nil {
		t.Fatalf("WaitServing: %v", err)
	}
	if got := n.Load(); got != 4 {
		t.Errorf("probed %d times, want 4", got)
	}

	// A None deployer that never sees the model times out with the last answer.
	never := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no upstream", http.StatusBadGateway)
	}))
	defer never.Close()
	d := &None{Options: Options{Endpoint: never.URL, Model: "glm", ReadyTimeout: 50 * time.Millisecond, Poll: time.Millisecond, HTTP: never.Client()}}
	err := d.Deploy(context.Background())
	if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "502") {
		t.Errorf("None.Deploy = %v, want a timeout naming the 502", err)
	}
	if err := d.Rollback(context.Background()); err != nil {
		t.Errorf("None.Rollback = %v", err)
	}
}
