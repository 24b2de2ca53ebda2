package record

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-bench/headroom/internal/transport"
)

// Capture limits: a request or answer past them passes through unrecorded.
const (
	maxRequestBytes = 64 << 20
	maxAnswerBytes  = 16 << 20
)

// exchange is one chat completion as it passed: the bytes both ways, kept in
// memory only until the recorder has taken its shape.
type exchange struct {
	arrival, first, end time.Time
	req, resp           []byte
	reqDone             chan struct{} // closed when the request body was fully read or closed
	reqOnce             sync.Once
	status              int
	contentType         string
	encoding            string // the answer's Content-Encoding
	auth                http.Header
	reqTooLarge         bool  // written while reading the request; read after reqDone
	respTooLarge        bool  // written while reading the answer
	reqLen              int64 // the request's Content-Length, for the queue's budget before reqDone
	queuedSize          int64 // what the exchange counts against the queue's budget
	complete            bool  // the answer was read to its end
	finished            bool
}

type exchangeKey struct{}

// bufs recycles capture buffers.
var bufs = sync.Pool{New: func() any { return new([]byte) }}

func getBuf() []byte { return (*bufs.Get().(*[]byte))[:0] }

func putBuf(b []byte) {
	if cap(b) == 0 || cap(b) > 8<<20 {
		return
	}
	b = b[:0]
	bufs.Put(&b)
}

// size is what the exchange weighs in the queue: its answer and its
// request (by Content-Length, as the request body may still be closing).
func (x *exchange) size() int64 { return max(x.reqLen, 0) + int64(cap(x.resp)) }

// release gives the buffers back; the text is gone from then on.
func (x *exchange) release() {
	putBuf(x.req)
	putBuf(x.resp)
	x.req, x.resp, x.auth = nil, nil, nil
}

// authHeaders are the request headers passed on to /tokenize (in memory
// only), so a gateway that wants a key lets the recorder count tokens.
var authHeaders = []string{"Authorization", "Api-Key", "X-Api-Key"}

func (r *Recorder) newProxy() http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(r.o.Upstream)
		},
		Transport: r.o.Transport,
		// flush after every write: each chunk goes on as it arrives
		FlushInterval:  -1,
		BufferPool:     copyBuffers{},
		ModifyResponse: r.capture,
		ErrorHandler:   r.proxyError,
		// ReverseProxy logs a stream the upstream broke off: the first is
		// logged, every cut stream is counted (captureBody.Close)
		ErrorLog: log.New(cutWriter{r}, "", 0),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.stats.proxied.Add(1)
		if req.Method != http.MethodPost || !isChat(req.URL.Path) || r.closed.Load() {
			rp.ServeHTTP(w, req)
			return
		}
		r.stats.chats.Add(1)
		x := &exchange{arrival: r.o.Now(), reqDone: make(chan struct{}), req: getBuf(), reqLen: req.ContentLength}
		for _, h := range authHeaders {
			if !r.tok.wanted() {
				break // text blocks: the key is not kept past the pass-through
			}
			if v := req.Header.Values(h); len(v) > 0 {
				if x.auth == nil {
					x.auth = http.Header{}
				}
				x.auth[h] = v
			}
		}
		if req.Body == nil || req.Body == http.NoBody {
			x.doneReading()
		} else {
			req.Body = &teeBody{rc: req.Body, x: x}
		}
		rp.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), exchangeKey{}, x)))
		if !x.finished { // no answer came (the upstream failed): nothing to record
			x.finished = true
			r.stats.notOK.Add(1)
			go func() { <-x.reqDone; x.release() }()
		}
	})
}

// isChat says whether a path is the chat-completions endpoint, under any
// prefix (/v1/chat/completions, /openai/v1/chat/completions).
func isChat(path string) bool {
	return strings.HasSuffix(strings.TrimSuffix(path, "/"), "/chat/completions")
}

// capture wraps a chat answer's body so its bytes are kept as they pass.
func (r *Recorder) capture(resp *http.Response) error {
	x, _ := resp.Request.Context().Value(exchangeKey{}).(*exchange)
	if x == nil {
		return nil
	}
	x.status = resp.StatusCode
	x.contentType = resp.Header.Get("Content-Type")
	x.encoding = resp.Header.Get("Content-Encoding")
	x.resp = getBuf()
	resp.Body = &captureBody{rc: resp.Body, x: x, r: r}
	return nil
}

// proxyError answers 502 when the upstream cannot be reached; the message
// names no secret (the upstream URL carries no user info).
func (r *Recorder) proxyError(w http.ResponseWriter, req *http.Request, err error) {
	if req.Context().Err() != nil {
		return // the agent went away
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	msg := strings.ReplaceAll(err.Error(), `"`, `'`)
	_, _ = io.WriteString(w, `{"error":{"message":"headroom record: the upstream did not answer: `+msg+`","type":"proxy_error","code":502}}`)
}

// teeBody keeps a copy of the request body as the transport sends it.
// After the end it answers io.EOF itself: the transport reads once more past
// Content-Length, and by then the server may have closed the agent's body
// (it does when the answer's header goes out), which would read as an error
// and make the transport drop the upstream connection mid-answer.
type teeBody struct {
	rc  io.ReadCloser
	x   *exchange
	eof bool
}

func (t *teeBody) Read(p []byte) (int, error) {
	if t.eof {
		return 0, io.EOF
	}
	n, err := t.rc.Read(p)
	t.eof = err == io.EOF
	if n > 0 && !t.x.reqTooLarge {
		if len(t.x.req)+n > maxRequestBytes {
			t.x.reqTooLarge = true
		} else {
			t.x.req = append(t.x.req, p[:n]...)
		}
	}
	if err != nil {
		t.x.doneReading()
	}
	return n, err
}

func (t *teeBody) Close() error {
	err := t.rc.Close()
	t.x.doneReading()
	return err
}

func (x *exchange) doneReading() { x.reqOnce.Do(func() { close(x.reqDone) }) }

// captureBody keeps a copy of the answer and stamps its first byte; closing
// it hands the exchange to the recorder.
type captureBody struct {
	rc io.ReadCloser
	x  *exchange
	r  *Recorder
}

func (c *captureBody) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	x := c.x
	if n > 0 {
		if x.first.IsZero() {
			x.first = c.r.o.Now()
		}
		if !x.respTooLarge {
			if len(x.resp)+n > maxAnswerBytes {
				x.respTooLarge = true
			} else {
				x.resp = append(x.resp, p[:n]...)
			}
		}
	}
	if err == io.EOF {
		x.complete = true
	}
	return n, err
}

func (c *captureBody) Close() error {
	err := c.rc.Close()
	if !c.x.finished {
		c.x.finished = true
		if !c.x.complete {
			c.r.stats.cut.Add(1) // the agent left or the upstream broke off
		}
		c.x.end = c.r.o.Now()
		c.r.enqueue(c.x)
	}
	return err
}

// enqueue hands a finished exchange to the recorder without ever waiting:
// when the queue is full it is dropped and counted.
func (r *Recorder) enqueue(x *exchange) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	drop := func(n *atomic.Int64, logged *atomic.Bool, msg string) {
		n.Add(1)
		if logged != nil {
			r.once(logged, "%s", msg)
		}
		go func() { <-x.reqDone; x.release() }()
	}
	const behind = "record: the recorder is behind: a request passed unrecorded (further drops are only counted)"
	switch {
	case r.closed.Load():
		drop(&r.stats.dropClosed, nil, "")
		return
	case x.status < 200 || x.status > 299:
		drop(&r.stats.notOK, nil, "")
		return
	case x.respTooLarge:
		drop(&r.stats.tooLarge, &r.stats.loggedTooLarge, "record: a request or answer over the capture limit passed unrecorded (further ones are only counted)")
		return
	}
	size := x.size()
	x.queuedSize = size
	if r.queued.Add(size) > r.o.QueueBytes {
		r.queued.Add(-size)
		drop(&r.stats.dropQueue, &r.stats.loggedQueue, behind)
		return
	}
	select {
	case r.queue <- x:
	default:
		r.queued.Add(-size)
		drop(&r.stats.dropQueue, &r.stats.loggedQueue, behind)
	}
}

// cutWriter takes ReverseProxy's own log lines (a copy that failed).
type cutWriter struct{ r *Recorder }

func (c cutWriter) Write(p []byte) (int, error) {
	c.r.once(&c.r.stats.loggedCut, "record: %s (further ones are only counted)", strings.TrimSpace(string(p)))
	return len(p), nil
}

// copyBuffers lends the proxy its 32 KiB copy buffers.
type copyBuffers struct{}

var copyPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (copyBuffers) Get() []byte  { return *copyPool.Get().(*[]byte) }
func (copyBuffers) Put(b []byte) { copyPool.Put(&b) }

// DefaultTransport reaches the upstream: headroom's base transport without
// proxies, with enough idle connections that 1,000 concurrent agents do
// not dial for every request, and answers passed through as encoded.
func DefaultTransport() *http.Transport {
	t := transport.Base()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 4096
	t.DisableCompression = true
	return t
}
