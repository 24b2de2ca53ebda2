// Package memnet serves HTTP handlers in memory, on a clock: the transport a
// simulated run uses on a virtual clock, where no socket may block a
// goroutine behind the clock's back. A request runs its handler in a
// goroutine started on the clock; the response streams back through a pipe
// whose reads wait on the clock, so a streamed answer arrives chunk by chunk
// at the modelled instants the handler wrote them.
package memnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-bench/headroom/internal/timescale"
)

// Net is a set of in-memory hosts. The zero value is not usable; use New.
type Net struct {
	clock *timescale.Clock
	mu    sync.Mutex
	hosts map[string]http.Handler
	n     int
	// prepared is the bytes of request bodies read ahead for a Preparer
	// and not yet handed back (at most preparedBytes).
	prepared int64
}

// Preparer is a host that can do a request's pure work before the request's
// turn on the clock: when a request with a body of known length reaches it,
// memnet reads the body and calls Prepare off the clock, on a goroutine of
// its own, while the clock goes on running other goroutines; the handler
// takes the result with Prepared. The result must depend on the request and
// body alone, and Prepare must not wait on the clock, so what the handler
// computes is the same as without it, only sooner: the clock keeps one
// goroutine running at a time, and this work uses another core meanwhile.
type Preparer interface {
	http.Handler
	Prepare(req *http.Request, body []byte) any
}

// preparedBytes bounds the bodies read ahead and not yet handed back: a
// fleet's thousands of lanes all send at modelled time 0, and a body read
// ahead is held until its handler runs.
const preparedBytes = 256 << 20

// prep is a request body read ahead, and what Prepare made of it.
type prep struct {
	done chan struct{} // closed when both are ready
	body []byte
	err  error
	v    any
	size int64 // the body's length, counted against preparedBytes
	// for a body read ahead of its send (ReadAhead): the network and host
	// it was read for, and whether it was used or discarded
	n    *Net
	host string
	used atomic.Bool
}

type aheadKey struct{}

// ReadAhead reads the body of a request the caller will send later, and
// prepares it for its host, off the clock, as a Preparer's requests are
// (a client that knows its next request while its last answer streams
// starts it here, so the work is done by the time the request is sent).
// The request to send later must carry the context that with returns and
// the same body, byte for byte (its length is checked); discard lets the
// bytes go when it will not be sent. Both are nil when the host is not a
// Preparer, the body's length is unknown, or the bodies read ahead are at
// their bound.
func (t roundTripper) ReadAhead(req *http.Request) (with func(context.Context) context.Context, discard func()) {
	n := t.n
	n.mu.Lock()
	h := n.hosts[req.URL.Host]
	n.mu.Unlock()
	pr, ok := h.(Preparer)
	if !ok || req.Body == nil || req.ContentLength <= 0 {
		return nil, nil
	}
	p := n.readAhead(pr, req)
	if p == nil {
		return nil, nil
	}
	p.n, p.host = n, req.URL.Host
	return func(ctx context.Context) context.Context { return context.WithValue(ctx, aheadKey{}, p) },
		func() {
			if p.used.CompareAndSwap(false, true) {
				n.handBack(p)
			}
		}
}

// readAheadFor is the body read ahead for req (ReadAhead), if req's context
// carries one for this network and host, of req's length, not used before.
func (n *Net) readAheadFor(req *http.Request) *prep {
	p, _ := req.Context().Value(aheadKey{}).(*prep)
	if p == nil || p.n != n || p.host != req.URL.Host || p.size != req.ContentLength || !p.used.CompareAndSwap(false, true) {
		return nil
	}
	return p
}

type preparedKey struct{}

// Prepared returns what the host's Prepare made of the request whose
// context this is, waiting for it (the handler's goroutine holds its turn
// meanwhile, so modelled time does not move); nil when the request was not
// prepared or Prepare returned nil.
func Prepared(ctx context.Context) any {
	p, _ := ctx.Value(preparedKey{}).(*prep)
	if p == nil {
		return nil
	}
	<-p.done
	return p.v
}

// readAhead reads req's body and runs pr.Prepare on it off the clock, when
// the bodies read ahead leave room for it; nil when they do not.
func (n *Net) readAhead(pr Preparer, req *http.Request) *prep {
	size := req.ContentLength
	n.mu.Lock()
	if n.prepared+size > preparedBytes {
		n.mu.Unlock()
		return nil
	}
	n.prepared += size
	n.mu.Unlock()
	p := &prep{done: make(chan struct{}), size: size}
	// Nothing else reads the body meanwhile: a request's client waits in
	// RoundTrip for the response head, and RoundTrip waits for this before
	// it returns; a request read ahead of its send (ReadAhead) is the
	// caller's to give away.
	// labelled so a profile tells work beside the clock apart (docs/performance.md)
	go pprof.Do(context.Background(), pprof.Labels("beside", "prepare"), func(context.Context) {
		defer close(p.done)
		p.body, p.err = readAll(req.Body, size)
		if p.err == nil {
			p.v = pr.Prepare(req, p.body)
		}
	})
	return p
}

// handBack waits for p and lets its bytes count no more against the bound.
func (n *Net) handBack(p *prep) {
	<-p.done
	n.mu.Lock()
	n.prepared -= p.size
	n.mu.Unlock()
}

// New returns an empty network on clock.
func New(clock *timescale.Clock) *Net {
	return &Net{clock: clock, hosts: map[string]http.Handler{}}
}

// Serve adds h as a new host and returns its base URL, such as
// "http://sim-1.memnet". Requests to it through Transport reach h.
func (n *Net) Serve(h http.Handler) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.n++
	host := fmt.Sprintf("sim-%d.memnet", n.n)
	n.hosts[host] = h
	return "http://" + host
}

// Replace puts h at base; nil takes the host off the network, so its
// requests are refused as a crashed server's connections are.
func (n *Net) Replace(base string, h http.Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	host := strings.TrimPrefix(base, "http://")
	if h == nil {
		delete(n.hosts, host)
		return
	}
	n.hosts[host] = h
}

// Transport is the round tripper that reaches the network's hosts.
func (n *Net) Transport() http.RoundTripper { return roundTripper{n} }

// Client is an HTTP client over Transport.
func (n *Net) Client() *http.Client { return &http.Client{Transport: n.Transport()} }

type roundTripper struct{ n *Net }

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	n := t.n
	n.mu.Lock()
	h := n.hosts[req.URL.Host]
	n.mu.Unlock()
	if h == nil {
		return nil, &net.OpError{Op: "dial", Net: "memnet", Err: fmt.Errorf("connect to %s: connection refused", req.URL.Host)}
	}
	body := &reqBody{}
	var ahead *prep
	if pr, ok := h.(Preparer); ok && req.Body != nil && req.ContentLength > 0 {
		if ahead = n.readAheadFor(req); ahead == nil {
			ahead = n.readAhead(pr, req)
		}
	}
	switch {
	case ahead != nil:
		body.ahead, body.left = ahead, req.ContentLength
		defer func() {
			n.handBack(ahead)
			req.Body.Close()
		}()
	case req.Body != nil && req.ContentLength > 0:
		// The handler reads the client's body itself; what it has not read
		// when the round trip returns is copied then (detach).
		body.src, body.left = req.Body, req.ContentLength
		defer body.detach()
	case req.Body != nil:
		b, err := readAll(req.Body, req.ContentLength)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body.b, body.left = b, int64(len(b))
	}
	ctx, cancel := n.clock.WithCancel(req.Context())
	if ahead != nil {
		ctx = context.WithValue(ctx, preparedKey{}, ahead)
	}
	sreq := req.Clone(ctx)
	sreq.Body = body
	sreq.ContentLength = body.left
	sreq.RemoteAddr = "127.0.0.1:1"
	sreq.RequestURI = req.URL.RequestURI()
	sreq.Host = req.URL.Host
	if sreq.Header == nil {
		sreq.Header = http.Header{}
	}
	c := n.clock
	w := &writer{header: http.Header{}, headed: c.NewLatch(), p: &pipe{c: c, data: c.NewSignal()}}
	c.Go(func() {
		defer func() {
			w.finish()
			cancel()
		}()
		h.ServeHTTP(w, sreq)
	})
	if _, err := c.WaitFor(req.Context(), "memnet response head", -1, w.headed); err != nil {
		cancel()
		return nil, err
	}
	resp := &http.Response{
		Status:        fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &respBody{p: w.p, ctx: req.Context(), cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}
	return resp, nil
}

// readAll reads a request body of unknown length whole.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 || size > 1<<34 {
		return io.ReadAll(r)
	}
	b := make([]byte, size, size+1)
	if n, err := io.ReadFull(r, b); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("memnet: request body ended after %d of its %d bytes: %w", n, size, err)
		}
		return nil, err
	}
	var one [1]byte
	if n, err := io.ReadFull(r, one[:]); n > 0 {
		rest, err := io.ReadAll(r) // more than the client said: keep it all, as io.ReadAll would
		return append(append(b, one[0]), rest...), err
	} else if err != io.EOF {
		return nil, err
	}
	return b, nil
}

// reqBody is the handler's request body. While the round trip waits for
// the response head, the handler reads the client's body (src) itself, so
// a long prompt is copied once, into the handler's buffer; when the round
// trip returns, the client may reuse what its body reads from, so whatever
// the handler has not read by then is copied into b (detach). A body
// without a length is copied whole before the handler starts. b lets go of
// its bytes as they are read.
type reqBody struct {
	mu    sync.Mutex
	ahead *prep         // the body read ahead for a Preparer, until first read
	src   io.ReadCloser // the client's body, until detached
	left  int64         // bytes of src the length promises and the handler has not read
	b     []byte        // what is left to read once detached
	err   error         // what reading src failed with
}

func (r *reqBody) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.ahead; a != nil {
		// read ahead off the clock: wait for it, holding the turn
		<-a.done
		r.ahead, r.b, r.err, r.left = nil, a.body, a.err, 0
		if errors.Is(a.err, io.ErrUnexpectedEOF) {
			r.err = io.ErrUnexpectedEOF
		}
	}
	if r.src != nil {
		if r.left <= 0 {
			return 0, io.EOF
		}
		if int64(len(p)) > r.left {
			p = p[:r.left]
		}
		n, err := r.src.Read(p)
		r.left -= int64(n)
		if err == io.EOF && r.left > 0 {
			err = io.ErrUnexpectedEOF
		} else if err == io.EOF || r.left == 0 {
			err = nil
			if n == 0 {
				err = io.EOF
			}
		}
		return n, err
	}
	if len(r.b) == 0 {
		r.b = nil
		if r.err != nil {
			return 0, r.err
		}
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// detach copies what the handler has not read of the client's body, and
// closes it, as a round trip must.
func (r *reqBody) detach() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.src == nil {
		return
	}
	if r.left > 0 {
		r.b = make([]byte, r.left)
		if n, err := io.ReadFull(r.src, r.b); err != nil {
			r.b, r.err = r.b[:n], io.ErrUnexpectedEOF
		}
	}
	r.src.Close()
	r.src, r.left = nil, 0
}

func (r *reqBody) Close() error { return nil }

// writer is the handler's side.
type writer struct {
	header http.Header
	sent   http.Header // the header as of WriteHeader
	status int
	headed *timescale.Signal
	p      *pipe
}

func (w *writer) Header() http.Header { return w.header }

func (w *writer) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	w.sent = w.header.Clone()
	w.headed.Close()
}

func (w *writer) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.p.write(b)
}

// Flush is a no-op: every write reaches the reader at once.
func (w *writer) Flush() {}

func (w *writer) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.p.close()
}

var errClosed = errors.New("memnet: the client closed the response")

// lazyBytes is how much a stamped pipe (pipe.stamped) holds unread before
// a write wakes its reader: a few dozen token chunks.
const lazyBytes = 16 << 10

// pipe carries the response body; writes never block.
//
// A reader that takes stamps (respBody.Stamped) reads when each byte was
// written rather than when it reads it, so a write need not wake it: the
// pipe notes the write's modelled instant and wakes the reader only when
// the handler returns or lazyBytes are waiting. A streamed answer then
// costs its client a wake per few dozen tokens, not one per token, with
// the same stamps.
type pipe struct {
	c    *timescale.Clock
	mu   sync.Mutex
	buf  []byte
	off  int
	eof  bool // the handler returned
	gone bool // the client closed the body
	data *timescale.Signal
	// stamped: the reader takes stamps. marks are where each write of
	// buf[off:] ends and when it was written (writes of one instant
	// joined); stamp is the instant of the bytes read last.
	stamped bool
	marks   []mark
	mi      int
	stamp   time.Time
}

// mark is the end in pipe.buf of a write, and its instant.
type mark struct {
	end int
	at  time.Time
}

func (p *pipe) write(b []byte) (int, error) {
	p.mu.Lock()
	if p.gone {
		p.mu.Unlock()
		return 0, errClosed
	}
	if p.off == len(p.buf) {
		p.buf, p.off = p.buf[:0], 0
		p.marks, p.mi = p.marks[:0], 0
	}
	if p.buf == nil && p.stamped {
		// room for what it holds before it wakes the reader, at once
		p.buf = make([]byte, 0, lazyBytes+max(len(b), 4<<10))
	}
	p.buf = append(p.buf, b...)
	wake := true
	if p.stamped {
		at := p.c.Time()
		if n := len(p.marks); n > p.mi && p.marks[n-1].at.Equal(at) {
			p.marks[n-1].end = len(p.buf)
		} else {
			p.marks = append(p.marks, mark{len(p.buf), at})
		}
		wake = len(p.buf)-p.off >= lazyBytes
	}
	p.mu.Unlock()
	if wake {
		p.data.Poke()
	}
	return len(b), nil
}

func (p *pipe) close() {
	p.mu.Lock()
	p.eof = true
	p.mu.Unlock()
	p.data.Poke()
}

func (p *pipe) read(ctx context.Context, b []byte) (int, error) {
	for {
		p.mu.Lock()
		if p.off < len(p.buf) {
			end := len(p.buf)
			if p.stamped {
				// one write's bytes at a time, so the stamp is theirs
				m := p.marks[p.mi]
				end, p.stamp = m.end, m.at
			}
			n := copy(b, p.buf[p.off:end])
			p.off += n
			if p.stamped && p.off == end {
				p.mi++
			}
			p.mu.Unlock()
			return n, nil
		}
		if p.eof {
			p.mu.Unlock()
			return 0, io.EOF
		}
		if p.gone {
			p.mu.Unlock()
			return 0, errClosed
		}
		p.mu.Unlock()
		if _, err := p.c.WaitFor(ctx, "memnet body", -1, p.data); err != nil {
			p.mu.Lock()
			unread := p.off < len(p.buf)
			p.mu.Unlock()
			if !unread {
				return 0, err
			}
			// a stamped reader first reads what was written before its
			// context ended, as one woken at every write had; the next
			// read returns the error
		}
	}
}

// respBody is the client's side.
type respBody struct {
	p      *pipe
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *respBody) Read(buf []byte) (int, error) { return b.p.read(b.ctx, buf) }

// Stamped makes the body's reads say when their bytes were written: the
// returned func gives the modelled instant (as Clock.Time reads it) at which
// the handler wrote the bytes the last Read returned. A Read returns the
// bytes of one write at most (or of writes at one instant), and from then
// on a write wakes a waiting Read only once the handler returns or
// lazyBytes wait (see pipe): a reader that stamps what it reads with this,
// not the clock's now, sees the stamps it would have seen woken by every
// write. It is called before the first Read, from the reader's goroutine.
func (b *respBody) Stamped() func() time.Time {
	p := b.p
	p.mu.Lock()
	if !p.stamped && p.off < len(p.buf) {
		// written since the head came back: the reader has not run since,
		// so modelled time has not moved
		p.marks = append(p.marks[:0], mark{len(p.buf), p.c.Time()})
		p.mi = 0
	}
	p.stamped = true
	p.mu.Unlock()
	// only the reader's goroutine sets p.stamp (in read) and reads it here
	return func() time.Time { return p.stamp }
}

// Close tells the handler the client went away (its request context is
// cancelled and its writes fail), as closing a connection does.
func (b *respBody) Close() error {
	b.p.mu.Lock()
	done := b.p.eof && b.p.off == len(b.p.buf)
	b.p.gone = true
	b.p.mu.Unlock()
	if !done {
		b.cancel()
	}
	return nil
}
