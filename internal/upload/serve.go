package upload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Handler serves the run directories under root, read-only:
//
//	GET /v1/runs                      the runs, as JSON (see Run)
//	GET /v1/pack?run=recipe/run&...   those runs as one tar.gz (no run: all)
//	GET /healthz                      ok
func Handler(root string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /v1/runs", func(w http.ResponseWriter, _ *http.Request) {
		runs, err := ListRuns(root)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if runs == nil {
			runs = []Run{}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(runs)
	})
	mux.HandleFunc("GET /v1/pack", func(w http.ResponseWriter, r *http.Request) {
		names := r.URL.Query()["run"]
		for _, n := range names {
			if _, err := resolve(root, n); err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
		}
		w.Header().Set("Content-Type", "application/gzip")
		w.Header().Set("Content-Disposition", `attachment; filename="runs.tar.gz"`)
		// once the first byte is out an error can only cut the stream,
		// which Unpack reports as cut short
		Pack(w, root, names)
	})
	return mux
}

// Serve serves Handler(root) on addr until ctx ends; ready, if set, is
// told the address it listens on.
func Serve(ctx context.Context, root, addr string, ready func(string)) error {
	srv := &http.Server{Addr: addr, Handler: Handler(root), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// Runs lists the runs a `headroom runs serve` at base holds.
func Runs(ctx context.Context, hc *http.Client, base string) ([]Run, error) {
	resp, err := get(ctx, hc, strings.TrimSuffix(base, "/")+"/v1/runs")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var runs []Run
	if err := json.NewDecoder(resp.Body).Decode(&runs); err != nil {
		return nil, fmt.Errorf("%s/v1/runs: %w (is it `headroom runs serve`?)", base, err)
	}
	return runs, nil
}

// Pull fetches the named runs (none: all) from a `headroom runs serve` at
// base and unpacks them under dest; it returns the runs it wrote.
func Pull(ctx context.Context, hc *http.Client, base, dest string, names []string) ([]string, error) {
	q := url.Values{"run": names}
	u := strings.TrimSuffix(base, "/") + "/v1/pack"
	if len(names) > 0 {
		u += "?" + q.Encode()
	}
	resp, err := get(ctx, hc, u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return Unpack(resp.Body, dest)
}

func get(ctx context.Context, hc *http.Client, u string) (*http.Response, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w (is `headroom runs serve` running there, and the port forwarded?)", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, nil
}
