package rig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/headroom-bench/headroom/internal/timescale"
)

// notReady is an answer a starting engine gives: worth waiting out.
type notReady struct{ why string }

func (e *notReady) Error() string { return e.why }

// cannotReach is a connection failure no wait mends; it says what to check.
type cannotReach struct{ why string }

func (e *cannotReach) Error() string { return e.why }

// probeModels asks endpoint's /v1/models once: nil when it answers 200, a
// *notReady when the server is still starting (a connection reset or a
// remote port not open yet, or 502/503/504 while the model loads), any
// other error when waiting would not help: a host name that does not
// resolve, or nothing listening on a loopback port.
func probeModels(ctx context.Context, hc *http.Client, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/v1/models", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if hopeless := unreachable(req.URL, err); hopeless != nil {
			return hopeless
		}
		return &notReady{why: fmt.Sprintf("/v1/models did not answer (%v)", err)}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusServiceUnavailable:
		return &notReady{why: "/v1/models answered 503 (loading?)"}
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return &notReady{why: fmt.Sprintf("/v1/models answered %d (a gateway whose engine is not up yet?)", resp.StatusCode)}
	}
	return fmt.Errorf("%s/v1/models answered HTTP %d", endpoint, resp.StatusCode)
}

// unreachable says why a failed connection will not mend by waiting, or nil
// when it may (an engine that resets connections while it loads, a remote
// port a pod has not opened yet, a timeout). A host name that does not
// resolve stays so; on a loopback address a refused connection means no
// process listens there, as a local engine binds its port before it loads.
// Neither message holds the URL, so nothing secret in it is printed.
func unreachable(u *url.URL, err error) *cannotReach {
	host := u.Hostname()
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return &cannotReach{why: fmt.Sprintf("the endpoint's host %q does not resolve (no such host): check the spelling of recipe.endpoint, and that this machine's DNS knows the name (a Kubernetes service name resolves only inside its cluster: use a port-forward or the ingress)", host)}
	}
	if errors.Is(err, syscall.ECONNREFUSED) && loopback(host) {
		return &cannotReach{why: fmt.Sprintf("nothing listens on %s port %s (connection refused): start the server, or check the port in recipe.endpoint", host, portOf(u))}
	}
	return nil
}

// loopback says whether host is this machine: localhost or a loopback IP.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// portOf is u's port, or the scheme's default.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// waitReady waits, up to timeout of modelled time, until endpoint answers
// /v1/models, as an engine that is still loading does not. It says what it
// waits for on progress: once at the first refusal, then every few seconds.
// An answer no wait can mend (401, 404, ...) returns at once.
func waitReady(ctx context.Context, hc *http.Client, endpoint string, timeout time.Duration, clock *timescale.Clock, progress io.Writer) error {
	poll := min(2*time.Second, max(timeout/50, 20*time.Millisecond))
	every := min(10*time.Second, max(timeout/10, poll))
	start := clock.Now()
	var lastShown time.Duration = -1
	tries := 0
	for {
		err := probeModels(ctx, hc, endpoint)
		tries++
		var nr *notReady
		var cr *cannotReach
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("interrupted while waiting for the endpoint: %w", ctx.Err())
		case errors.As(err, &cr):
			return cr
		case !errors.As(err, &nr):
			return fmt.Errorf("the endpoint does not answer as an OpenAI-compatible server: %w (is recipe.endpoint right?)", err)
		}
		waited := clock.Now() - start
		if waited >= timeout {
			return fmt.Errorf("the endpoint was not ready after %s: %s (asked %d times); raise sweep.ready_timeout_s if the engine takes longer to load, or check that recipe.endpoint is right", fmtSeconds(timeout), nr.why, tries)
		}
		if lastShown < 0 || waited-lastShown >= every {
			fmt.Fprintf(progress, "waiting for the endpoint: %s, %s of %s\n", nr.why, fmtSeconds(waited), fmtSeconds(timeout))
			lastShown = waited
		}
		if err := clock.Sleep(ctx, poll); err != nil {
			return fmt.Errorf("interrupted while waiting for the endpoint: %s", nr.why)
		}
	}
}

// fmtSeconds writes a duration as whole seconds, "40 s".
func fmtSeconds(d time.Duration) string { return fmt.Sprintf("%.0f s", d.Seconds()) }
