package load

import (
	"context"
	"net"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// A token's stamp is the instant its bytes reached the client's socket,
// not the instant the client parsed them. Between the two lie the wake-up
// of the goroutine that reads the connection (net/http's read loop for an
// answer's head and the first chunk that came with it, the request's own
// goroutine for the rest), which at a thousand streams waits for a thread
// behind the other streams' work, and for the head the hand-off from the
// read loop to the request's goroutine. So the client dials stampConns,
// which note for each read that returned bytes when the kernel received
// the last of them (SO_TIMESTAMPNS, stream_stamp_linux.go) or, where the
// kernel does not say, when the read returned; each token is stamped with
// the last such note before its line was parsed: never earlier than the
// bytes of the line arrived, never later than its parse. A reader late by
// more than a token interval finds several chunks waiting, which the
// kernel reports as one arrival, the last: those stamps are late by whole
// token intervals (docs/performance.md, "A load pod's rating").

// stampBase is the instant stamps count from: a stamp is stampBase plus a
// monotonic offset, so it keeps time.Time's monotonic reading.
var stampBase = time.Now()

// stampConn is a connection that notes when the bytes of its last read
// that returned any arrived. It is read by the transport's read loop and by
// the request's goroutine (the body), one after the other, never at once,
// and its note is read by the latter. The zero kernel notes when the read
// returned.
type stampConn struct {
	net.Conn
	at     atomic.Int64 // since stampBase
	kernel *kernelStamps
}

// newStampConn is conn as a stampConn, with the kernel's receive times
// where it gives them.
func newStampConn(conn net.Conn) *stampConn {
	return &stampConn{Conn: conn, kernel: newKernelStamps(conn)}
}

func (c *stampConn) Read(p []byte) (int, error) {
	if c.kernel != nil {
		n, arrived, err := c.kernel.read(p)
		if n > 0 {
			c.at.Store(int64(arrived.Sub(stampBase)))
		}
		return n, err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.at.Store(int64(time.Since(stampBase)))
	}
	return n, err
}

// readAt is when the bytes of the last read that returned any arrived.
func (c *stampConn) readAt() time.Time { return stampBase.Add(time.Duration(c.at.Load())) }

// stampDial is dial whose connections are stampConns.
func stampDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newStampConn(conn), nil
	}
}

// stampConnOf is the stampConn under conn (a TLS connection's NetConn), or
// nil when there is none (a transport of the caller's, an in-memory one).
func stampConnOf(conn net.Conn) *stampConn {
	for range 4 {
		switch c := conn.(type) {
		case *stampConn:
			return c
		case interface{ NetConn() net.Conn }:
			conn = c.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// connTrace learns which connection a request went out on.
type connTrace struct{ conn atomic.Pointer[stampConn] }

// with is ctx with a trace that notes the request's connection.
func (t *connTrace) with(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		t.conn.Store(stampConnOf(info.Conn))
	}})
}

// now is the stamp clock for the request's body: the connection's last
// read when the request went out on a stampConn, else fallback.
func (t *connTrace) now(fallback func() time.Time) func() time.Time {
	if t == nil {
		return fallback
	}
	if sc := t.conn.Load(); sc != nil {
		return sc.readAt
	}
	return fallback
}
