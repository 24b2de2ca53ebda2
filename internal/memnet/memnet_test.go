package memnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/timescale"
)

// A streamed answer arrives chunk by chunk at the modelled instants the
// handler wrote them, with no wall time spent.
func TestStreamArrivesInModelledTime(t *testing.T) {
	c := timescale.NewVirtual()
	n := New(c)
	base := n.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", string(body))
		for i := range 3 {
			if err := c.Sleep(r.Context(), time.Second); err != nil {
				return
			}
			fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	var got []string
	c.Run(func() {
		resp, err := n.Client().Post(base+"/x", "text/plain", strings.NewReader("hi"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.Header.Get("X-Echo") != "hi" || resp.StatusCode != 200 {
			t.Errorf("status %d, echo %q", resp.StatusCode, resp.Header.Get("X-Echo"))
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			got = append(got, fmt.Sprintf("%s@%v", sc.Text(), c.Now()))
		}
		if err := sc.Err(); err != nil {
			t.Error(err)
		}
	})
	if s := strings.Join(got, ","); s != "chunk 0@1s,chunk 1@2s,chunk 2@3s" {
		t.Errorf("got %s", s)
	}
}

// Closing the body early cancels the handler's context, as a dropped
// connection does; an unknown host is a refused dial.
func TestCloseCancelsHandlerAndUnknownHostRefuses(t *testing.T) {
	c := timescale.NewVirtual()
	n := New(c)
	gone := c.NewLatch()
	var at time.Duration
	base := n.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		_ = c.Sleep(r.Context(), time.Hour)
		at = c.Now()
		gone.Close()
	}))
	c.Run(func() {
		resp, err := n.Client().Get(base)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Sleep(context.Background(), time.Minute)
		resp.Body.Close()
		if _, err := c.Wait(context.Background(), -1, gone); err != nil {
			t.Fatal(err)
		}
		if at != time.Minute {
			t.Errorf("the handler saw the close at %v, want 1m", at)
		}
		_, err = n.Client().Get("http://nowhere.memnet/")
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			t.Errorf("unknown host: %v, want a dial error", err)
		}
	})
}
