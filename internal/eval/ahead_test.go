package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/transport"
)

// preparing serves the fake server's answers in memory as a Preparer, and
// counts the requests whose body was read ahead and equal to the one read.
type preparing struct {
	s                *fakeServer
	served, prepared atomic.Int64
}

func (p *preparing) Prepare(_ *http.Request, body []byte) any { return bytes.Clone(body) }

func (p *preparing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.served.Add(1)
	if ahead, ok := memnet.Prepared(r.Context()).([]byte); ok {
		var body bytes.Buffer
		if _, err := body.ReadFrom(r.Body); err != nil || !bytes.Equal(body.Bytes(), ahead) {
			http.Error(w, "the body read ahead is not the body sent", http.StatusBadRequest)
			return
		}
		p.prepared.Add(1)
		r.Body = readCloser{bytes.NewReader(body.Bytes())}
	}
	p.s.handle(w, r)
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// plainCompleter hides a client's Ahead: Run sends each case as it comes.
type plainCompleter struct{ c *Client }

func (p plainCompleter) Complete(ctx context.Context, r Request) (Answer, error) {
	return p.c.Complete(ctx, r)
}

// On a virtual clock in memory, Run has every case's request written and
// read by the server before its send, and the report is the one a run
// that writes each request as it sends it gets, case for case; the fake
// server's "every other call broken" answers depend on the order requests
// arrive in, so a case sent out of order would show.
func TestRunWritesEachRequestAhead(t *testing.T) {
	for _, f := range []fault{good, everyOther} {
		var reps [2]Report
		var served, prepared [2]int64
		for i, ahead := range []bool{false, true} {
			clock := timescale.NewVirtual()
			n := memnet.New(clock)
			h := &preparing{s: &fakeServer{fault: f, left: make(chan struct{}, 64)}}
			base := n.Serve(h)
			cl := NewClient(base, "m", ClientOptions{Conn: transport.Conn{RoundTripper: n.Transport()}, Clock: clock})
			var c Completer = plainCompleter{cl}
			if ahead {
				c = cl
			}
			clock.Run(func() {
				reps[i] = Run(context.Background(), c, BuiltIn(2000), Options{Concurrency: 1, Seed: 7})
			})
			served[i], prepared[i] = h.served.Load(), h.prepared.Load()
		}
		a, _ := json.Marshal(reps[0])
		b, _ := json.Marshal(reps[1])
		if !reflect.DeepEqual(reps[0], reps[1]) {
			t.Errorf("fault %v: the report with requests written ahead differs:\n%s\n%s", f, b, a)
		}
		if served[1] == 0 || prepared[1] != served[1] || prepared[0] != served[0] || served[0] != served[1] {
			t.Errorf("fault %v: %d of %d requests prepared with Ahead (want all), %d of %d without", f, prepared[1], served[1], prepared[0], served[0])
		}
	}
}

// Ahead has the server read the body before the send only on a virtual
// clock's in-memory network; elsewhere it writes the body alone.
func TestAheadReadsAheadOnlyInMemory(t *testing.T) {
	clock := timescale.NewVirtual()
	n := memnet.New(clock)
	base := n.Serve(&preparing{s: &fakeServer{fault: good}})
	r := Request{Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 4}
	for _, tc := range []struct {
		name  string
		cl    *Client
		ahead bool
	}{
		{"memnet, virtual clock", NewClient(base, "m", ClientOptions{Conn: transport.Conn{RoundTripper: n.Transport()}, Clock: clock}), true},
		{"memnet, no clock", NewClient(base, "m", ClientOptions{Conn: transport.Conn{RoundTripper: n.Transport()}}), false},
		{"plain HTTP", NewClient("http://127.0.0.1:1", "m", ClientOptions{}), false},
	} {
		a := tc.cl.Ahead(r)
		body, err := a.take()
		want, _ := tc.cl.marshal(r)
		if err != nil || !bytes.Equal(body, want) || (a.with != nil) != tc.ahead {
			t.Errorf("%s: body %s (%v), read ahead %v; want %s, %v", tc.name, body, err, a.with != nil, want, tc.ahead)
		}
		a.Discard()
	}
}
