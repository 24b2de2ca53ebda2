package eval

import (
	"bytes"
	"context"
	"net/http"
	"runtime/pprof"
)

// aheadCompleter is a Completer that can write a request's body before the
// request is sent, beside its caller: Run has the next case's written while
// the case before it is answered.
type aheadCompleter interface {
	Completer
	Ahead(r Request) *Ahead
	CompleteAhead(ctx context.Context, r Request, a *Ahead) (Answer, error)
}

// readAheader is a transport that reads a request's body, and has its
// server prepare it, before the request is sent (memnet on a virtual
// clock: the work runs on another core while the clock goes on).
type readAheader interface {
	ReadAhead(req *http.Request) (with func(context.Context) context.Context, discard func())
}

// Ahead is a request body written ahead of its send, on a goroutine of its
// own, and where the transport can, read by the server too. Its work is
// pure (the body depends on the request alone) and touches no clock, so
// the request sent is the same bytes it would have been.
type Ahead struct {
	done    chan struct{}
	body    []byte
	err     error
	with    func(context.Context) context.Context
	discard func()
}

// Ahead starts writing r's body; CompleteAhead sends it, Discard lets it go.
func (c *Client) Ahead(r Request) *Ahead {
	a := &Ahead{done: make(chan struct{})}
	ra, readAhead := c.http.Transport.(readAheader)
	readAhead = readAhead && c.opts.Clock != nil && c.opts.Clock.Virtual()
	// labelled so a profile tells work beside the clock apart (docs/performance.md)
	go pprof.Do(context.Background(), pprof.Labels("beside", "eval"), func(context.Context) {
		defer close(a.done)
		if a.body, a.err = c.marshal(r); a.err != nil || !readAhead {
			return
		}
		req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(a.body))
		if err == nil {
			a.with, a.discard = ra.ReadAhead(req)
		}
	})
	return a
}

// CompleteAhead is Complete for r with its body written ahead by a, which
// must be Ahead(r)'s.
func (c *Client) CompleteAhead(ctx context.Context, r Request, a *Ahead) (Answer, error) {
	defer a.Discard()
	return c.complete(ctx, r, a)
}

// take waits for the body (the caller keeps its turn on a virtual clock
// meanwhile, so modelled time stands still) and returns it.
func (a *Ahead) take() ([]byte, error) {
	<-a.done
	return a.body, a.err
}

// Discard lets a request read ahead go; after its send it does nothing.
func (a *Ahead) Discard() {
	if a == nil {
		return
	}
	<-a.done
	if a.discard != nil {
		a.discard()
	}
}
