package rig

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// slowStart stands in front of an endpoint: it answers the first n
// requests for /v1/models with status, as an engine still loading its
// weights answers 503, and passes every other request through.
func slowStart(t *testing.T, endpoint string, n int64, status int) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var models atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" && models.Add(1) <= n {
			http.Error(w, "loading", status)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &models
}

// cancelOn is a progress writer that cancels the run once a line holding
// marker has been written.
type cancelOn struct {
	mu     sync.Mutex
	b      strings.Builder
	marker string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.Write(p)
	if strings.Contains(c.b.String(), c.marker) {
		c.cancel()
	}
	return len(p), nil
}

func (c *cancelOn) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// TestPreflightWaitsForASlowStart: an engine that answers 503 while it
// loads is waited for, with a line saying what the wait is for; pre-flight
// then passes.
func TestPreflightWaitsForASlowStart(t *testing.T) {
	cfg := againstSim(t, sim.DefaultProfile())
	endpoint, asked := slowStart(t, cfg.Recipe.Endpoint, 5, http.StatusServiceUnavailable)
	cfg.Recipe.Endpoint = endpoint
	cfg.Sweep.ReadyTimeoutS = 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	progress := &cancelOn{marker: "pre-flight: ", cancel: cancel} // stop once pre-flight is over
	sum, err := Run(ctx, Options{Config: cfg, Progress: progress})
	if len(sum.Phases) == 0 || sum.Phases[0].Name != PhasePreflight || sum.Phases[0].Status != "ok" {
		t.Fatalf("pre-flight did not wait for the slow start: phases %+v, err %v\n%s", sum.Phases, err, progress)
	}
	if !strings.Contains(progress.String(), "waiting for the endpoint: /v1/models answered 503 (loading?), ") || !strings.Contains(progress.String(), "of 20 s") {
		t.Errorf("the wait was not shown:\n%s", progress)
	}
	if asked.Load() <= 5 {
		t.Errorf("/v1/models was asked %d times, want more than the 5 that answered 503", asked.Load())
	}
}

// TestPreflightGivesUpOnAnEndpointThatStaysDown: pre-flight waits up to
// sweep.ready_timeout_s and then says what it waited for; an answer no
// wait can mend (404) fails at once.
func TestPreflightGivesUpOnAnEndpointThatStaysDown(t *testing.T) {
	cases := []struct {
		name   string
		status int
		want   []string
		waits  bool
	}{
		// still loading after the timeout
		{"503", http.StatusServiceUnavailable, []string{"not ready after 2 s", "answered 503", "sweep.ready_timeout_s"}, true},
		// the wrong URL: waiting would not help
		{"404", http.StatusNotFound, []string{"answered HTTP 404"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := againstSim(t, sim.DefaultProfile())
			cfg.Recipe.Endpoint, _ = slowStart(t, cfg.Recipe.Endpoint, 1<<30, c.status)
			cfg.Sweep.ReadyTimeoutS = 2
			var progress strings.Builder
			_, err := Run(context.Background(), Options{Config: cfg, Progress: &progress})
			var pe *PhaseError
			if !errors.As(err, &pe) || pe.Phase != PhasePreflight {
				t.Fatalf("err = %v, want a pre-flight failure", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if waited := strings.Contains(progress.String(), "waiting for the endpoint"); waited != c.waits {
				t.Errorf("waited %v, want %v:\n%s", waited, c.waits, progress.String())
			}
		})
	}
}

// TestWaitReadyTellsStartingFromUnreachable: only answers that mean
// "starting" are waited for. A host name that does not resolve and a
// refused connection on a loopback address fail at once, after one try,
// with what to check; a connection reset (an engine dropping connections
// while it loads) is waited out until the timeout. Before the fix, every
// connection failure was retried for the whole timeout.
func TestWaitReadyTellsStartingFromUnreachable(t *testing.T) {
	// a loopback port nothing listens on
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().String()
	ln.Close()
	// a loopback port that accepts and drops every connection
	resetter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resetter.Close() })
	go func() {
		for {
			c, err := resetter.Accept()
			if err != nil {
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // close with a reset
			}
			c.Close()
		}
	}()
	noSuchHost := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
	}
	cases := []struct {
		name     string
		endpoint string
		dial     func(ctx context.Context, network, addr string) (net.Conn, error)
		want     []string
		once     bool // fails after one try, without waiting
	}{
		// a typo in the host name
		{"no such host", "http://engine.no-such-domain.invalid:8000", noSuchHost, []string{`host "engine.no-such-domain.invalid" does not resolve`, "recipe.endpoint"}, true},
		// the server is not started, or the port is wrong
		{"refused on loopback", "http://" + closedPort, nil, []string{"nothing listens on 127.0.0.1 port " + closedPort[strings.LastIndex(closedPort, ":")+1:], "start the server"}, true},
		// connections reset while the engine loads: worth waiting for
		{"reset", "http://" + resetter.Addr().String(), nil, []string{"not ready after 30 s", "sweep.ready_timeout_s"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var dials atomic.Int64
			dialer := &net.Dialer{}
			dial := c.dial
			if dial == nil {
				dial = dialer.DialContext
			}
			hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return dial(ctx, network, addr)
			}}}
			clock, err := timescale.New(1000) // 30 modelled seconds are 30 ms of wall time
			if err != nil {
				t.Fatal(err)
			}
			var progress strings.Builder
			err = waitReady(context.Background(), hc, c.endpoint, 30*time.Second, clock, &progress)
			if err == nil {
				t.Fatal("waitReady passed against an endpoint that cannot answer")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if once := dials.Load() == 1; once != c.once {
				t.Errorf("dialled %d times, want once: %v (progress: %s)", dials.Load(), c.once, progress.String())
			}
		})
	}
}
