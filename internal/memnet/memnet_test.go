package memnet

import (
	"bufio"
	"bytes"
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

// The handler reads the request body the client sent, whether its length
// was given or not and whether it reads it before answering or after the
// round trip returned (the client may reuse its buffer by then), and a body
// shorter than its length is an error.
func TestRequestBodyOutlivesTheRoundTrip(t *testing.T) {
	c := timescale.NewVirtual()
	n := New(c)
	got := make(chan string, 8)
	base := n.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/now" {
			body, err := io.ReadAll(r.Body)
			got <- fmt.Sprintf("%d:%s:%v", r.ContentLength, body, err)
		}
		w.WriteHeader(200)
		if err := c.Sleep(r.Context(), time.Second); err != nil { // the client has returned by now
			return
		}
		if r.URL.Path != "/now" {
			body, err := io.ReadAll(r.Body)
			got <- fmt.Sprintf("%d:%s:%v", r.ContentLength, body, err)
		}
	}))
	c.Run(func() {
		for _, tc := range []struct {
			path, body string
			length     int64
		}{
			{"/now", "read at once", 12},
			{"/later", "known length", 12},
			{"/later", "unknown length", -1},
			{"/later", "short", 9},
		} {
			buf := []byte(tc.body)
			req, err := http.NewRequest(http.MethodPost, base+tc.path, io.MultiReader(bytes.NewReader(buf)))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = tc.length
			resp, err := n.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			copy(buf, "overwritten!!!") // as a pooled buffer is, after the call
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	for _, want := range []string{"12:read at once:<nil>", "12:known length:<nil>", "14:unknown length:<nil>", "9:short:unexpected EOF"} {
		if g := <-got; g != want {
			t.Errorf("handler read %q, want %q", g, want)
		}
	}
}

func TestReadAllChecksTheLength(t *testing.T) {
	if _, err := readAll(strings.NewReader("short"), 10); err == nil || !strings.Contains(err.Error(), "5 of its 10 bytes") {
		t.Errorf("short body: %v", err)
	}
	if b, err := readAll(strings.NewReader("longer than said"), 6); err != nil || string(b) != "longer than said" {
		t.Errorf("long body: %q, %v", b, err)
	}
}

// postBody posts body to url over n and returns the answer's body.
func postBody(t *testing.T, n *Net, ctx context.Context, url string, body io.Reader) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	resp, err := n.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// echoPreparer reads the body in Prepare (off the clock) and says so; its
// handler writes what Prepared gave it and the body it reads itself.
type echoPreparer struct{ prepared *int }

func (e echoPreparer) Prepare(r *http.Request, body []byte) any {
	return "prepared:" + string(body)
}

func (e echoPreparer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, _ := Prepared(r.Context()).(string)
	if v != "" {
		*e.prepared++
	}
	body, err := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s|%s|%v", v, body, err)
}

// A Preparer's handler gets what Prepare made of the body, and still reads
// the same body itself; a body of unknown length is not prepared; past the
// read-ahead bound, requests are served as without a Preparer.
func TestPreparerReadsAhead(t *testing.T) {
	c := timescale.NewVirtual()
	n := New(c)
	var prepared int
	base := n.Serve(echoPreparer{&prepared})
	post := func(body io.Reader) string { return postBody(t, n, context.Background(), base+"/x", body) }
	c.Run(func() {
		if got := post(strings.NewReader("hello")); got != "prepared:hello|hello|<nil>" {
			t.Errorf("prepared request: %q", got)
		}
		if got := post(io.MultiReader(strings.NewReader("no length"))); got != "|no length|<nil>" {
			t.Errorf("body of unknown length: %q", got)
		}
		n.mu.Lock()
		n.prepared = preparedBytes // the bound is taken
		n.mu.Unlock()
		if got := post(strings.NewReader("full")); got != "|full|<nil>" {
			t.Errorf("past the bound: %q", got)
		}
		n.mu.Lock()
		n.prepared = 0
		n.mu.Unlock()
	})
	if prepared != 1 {
		t.Errorf("%d requests prepared, want 1", prepared)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.prepared != 0 {
		t.Errorf("%d bytes still counted as read ahead after every round trip", n.prepared)
	}
}

// A request read ahead of its send (ReadAhead) is served from what was read
// then, once; a request of another length, or sent without the context,
// is read as usual; discarding one gives its bytes back.
func TestReadAheadOfTheSend(t *testing.T) {
	c := timescale.NewVirtual()
	n := New(c)
	var prepared int
	base := n.Serve(echoPreparer{&prepared})
	rt := n.Transport().(roundTripper)
	ahead := func(body string) (func(context.Context) context.Context, func()) {
		req, _ := http.NewRequest(http.MethodPost, base+"/x", strings.NewReader(body))
		return rt.ReadAhead(req)
	}
	post := func(ctx context.Context, body string) string {
		return postBody(t, n, ctx, base+"/x", strings.NewReader(body))
	}
	c.Run(func() {
		// the same length and another text shows which bytes were served:
		// the ones read ahead (a caller sends the same bytes)
		with, discard := ahead("hello")
		ctx := with(context.Background())
		if got := post(ctx, "HELLO"); got != "prepared:hello|hello|<nil>" {
			t.Errorf("sent with the context: %q, want the body read ahead", got)
		}
		if got := post(ctx, "HELLO"); got != "prepared:HELLO|HELLO|<nil>" {
			t.Errorf("sent again with a used read-ahead: %q, want its own body", got)
		}
		discard() // after its use: nothing
		with, discard = ahead("hello")
		if got := post(with(context.Background()), "hello!"); got != "prepared:hello!|hello!|<nil>" {
			t.Errorf("another length: %q, want its own body", got)
		}
		discard()
		with, discard = ahead("hello")
		discard()
		if got := post(with(context.Background()), "HELLO"); got != "prepared:HELLO|HELLO|<nil>" {
			t.Errorf("discarded read-ahead: %q, want its own body", got)
		}
	})
	n.mu.Lock()
	left := n.prepared
	n.mu.Unlock()
	if left != 0 {
		t.Errorf("%d bytes still counted as read ahead", left)
	}
	// a host that is not a Preparer reads nothing ahead
	plain := n.Serve(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req, _ := http.NewRequest(http.MethodPost, plain+"/x", strings.NewReader("x"))
	if with, _ := rt.ReadAhead(req); with != nil {
		t.Error("a plain host's request was read ahead")
	}
}
