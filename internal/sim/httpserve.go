package sim

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// countingServer serves h on TCP and counts in n the handlers running, so
// that shutdown can tell an answer it cut from a connection nobody used.
func countingServer(h http.Handler, n *atomic.Int64) *http.Server {
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		defer n.Add(-1)
		h.ServeHTTP(w, r)
	})
	return &http.Server{Handler: counted, ReadHeaderTimeout: 30 * time.Second}
}

// shutdown stops srv, letting open answers finish for up to 2 s, then
// closes what is left. Shutdown also waits up to 5 s for a connection that
// was opened and has sent no request yet (a client's spare dial, which Go's
// transport makes when another connection frees first); with no handler
// running nothing was cut, so that wait is no failure.
func shutdown(srv *http.Server, running *atomic.Int64, what string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := srv.Shutdown(ctx)
	if err == nil {
		return nil
	}
	_ = srv.Close()
	if n := running.Load(); n > 0 {
		return fmt.Errorf("%s: %w; %d answers were still being written and were cut", what, err, n)
	}
	return nil
}
