package load

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/transport"
)

// wholeAnswer writes a short answer (three tokens, usage, [DONE]) in one
// write when its handler returns, so the client's transport reads the
// head and every chunk in its first read.
var wholeAnswer = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	for i := range 3 {
		fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok%d "},"finish_reason":null}]}`+"\n\n", i)
	}
	fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`+"\n\ndata: [DONE]\n\n")
})

// The first token is stamped when its bytes came off the connection, which
// the transport's read loop did before it parsed the head and handed the
// response to the request's goroutine, not when that goroutine parsed the
// token: so the stamp is no later than the read loop's first-byte trace,
// and the tokens that came in one read share one stamp. Over TLS the
// stamp comes from the connection under it.
func TestTokensStampedAtTheirRead(t *testing.T) {
	plain := httptest.NewServer(wholeAnswer)
	defer plain.Close()
	secure := httptest.NewTLSServer(wholeAnswer)
	defer secure.Close()
	pool := secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	for _, tc := range []struct {
		name string
		c    *Client
	}{
		{"plain", NewClient(plain.URL, "m")},
		{"tls", NewClientConn(secure.URL, "m", transport.Conn{TLS: &tls.Config{RootCAs: pool}})},
	} {
		for turn := range 2 { // a new connection, then the same one again
			var firstByte time.Time
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotFirstResponseByte: func() { firstByte = time.Now() }})
			res := tc.c.Stream(ctx, []byte("a b c"), 3, time.Minute)
			if res.Error != "" || res.Chunks != 3 {
				t.Fatalf("%s, turn %d: %d chunks, error %q (%s)", tc.name, turn, res.Chunks, res.Error, res.Detail)
			}
			if firstByte.IsZero() || res.First.After(firstByte) {
				t.Errorf("%s, turn %d: first token stamped %v after the read loop's first byte; want at or before it", tc.name, turn, res.First.Sub(firstByte))
			}
			if !res.Last.Equal(res.First) || !res.FirstAnswer.Equal(res.First) {
				t.Errorf("%s, turn %d: one read's tokens stamped apart: first %v, first answer %v, last %v", tc.name, turn, res.First, res.FirstAnswer, res.Last)
			}
		}
		tc.c.Close()
	}
}

// A stampConn's note lies between the write of the bytes it read and the
// return of its read; on Linux the kernel stamps a TCP connection's reads.
func TestStampConnNotesItsReads(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	wrote := make(chan time.Time, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		t0 := time.Now()
		c.Write([]byte("data: x\n"))
		wrote <- t0
		io.Copy(io.Discard, c)
	}()
	conn, err := stampDial((&net.Dialer{}).DialContext)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := stampConnOf(conn)
	if sc == nil {
		t.Fatalf("stampDial gave a %T, not a stampConn", conn)
	}
	if runtime.GOOS == "linux" && sc.kernel == nil {
		t.Error("a TCP connection on Linux has no kernel receive stamps")
	}
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	returned := time.Now()
	if err != nil || string(buf[:n]) != "data: x\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if at, t0 := sc.readAt(), <-wrote; at.Before(t0) || at.After(returned) {
		t.Errorf("read stamped %v after the write began and %v before the read returned; want both at least 0", at.Sub(t0), returned.Sub(at))
	}
	conn.Close()
	if _, err := conn.Read(buf); err == nil {
		t.Error("a read of a closed connection did not fail")
	}
}
