package memnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/timescale"
)

// stampedLines posts to base and reads the answer's lines through a
// stamped body: each line with the instant it was written, and the instant
// it was read.
func stampedLines(t *testing.T, c *timescale.Clock, n *Net, ctx context.Context, base string) (lines []string, err error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base, nil)
	resp, err := n.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	stamp := resp.Body.(interface{ Stamped() func() time.Time }).Stamped()
	br := bufio.NewReaderSize(resp.Body, 64) // smaller than a long write: read in pieces
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			lines = append(lines, fmt.Sprintf("%.8s@%v read@%v", strings.TrimSpace(line), c.At(stamp()), c.Now()))
		}
		if err == io.EOF {
			return lines, nil
		}
		if err != nil {
			return lines, err
		}
	}
}

// A stamped body's reads carry the instant each byte was written, and the
// reader is not woken at every write: it reads the whole answer when the
// handler returns, with the stamps it would have read woken at each.
func TestStampedReadsCarryTheirWriteInstants(t *testing.T) {
	c := timescale.NewVirtual()
	n := New(c)
	base := n.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		io.WriteString(w, "head\n") // before the client asks for stamps, at the same instant
		for _, parts := range [][]string{{"one\n"}, {"two-a\n", "two-b\n"}, {"three-is-a-line-longer-than-the-reader's-buffer-of-sixty-four-bytes\n"}} {
			if err := c.Sleep(r.Context(), time.Second); err != nil {
				return
			}
			for _, p := range parts {
				io.WriteString(w, p)
			}
		}
		_ = c.Sleep(r.Context(), time.Second)
	}))
	var got []string
	c.Run(func() {
		var err error
		if got, err = stampedLines(t, c, n, context.Background(), base); err != nil {
			t.Error(err)
		}
	})
	want := "head@0s read@0s,one@1s read@4s,two-a@2s read@4s,two-b@2s read@4s,three-is@3s read@4s"
	if s := strings.Join(got, ","); s != want {
		t.Errorf("got  %s\nwant %s", s, want)
	}
}

// Once lazyBytes wait unread, a write wakes the reader at its instant, so
// a long answer is not held whole in memory.
func TestStampedWakesPastLazyBytes(t *testing.T) {
	c := timescale.NewVirtual()
	n := New(c)
	base := n.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		small := strings.Repeat("s", 99) + "\n"
		_ = c.Sleep(r.Context(), time.Second)
		for range lazyBytes / len(small) {
			io.WriteString(w, small) // all at 1s, below the bound
		}
		_ = c.Sleep(r.Context(), time.Second)
		io.WriteString(w, strings.Repeat("b", len(small))+"\n") // past it: wakes
		_ = c.Sleep(r.Context(), time.Hour)
	}))
	var first string
	c.Run(func() {
		got, _ := stampedLines(t, c, n, context.Background(), base)
		first = got[0]
	})
	if first != "ssssssss@1s read@2s" {
		t.Errorf("first line %s, want it read at 2s, when the bound was passed", first)
	}
}

// A reader whose context ends reads what was written before it ends, with
// its stamps, and then the context's error, as a reader woken at every
// write would.
func TestStampedReaderDrainsBeforeItsContextEnds(t *testing.T) {
	c := timescale.NewVirtual()
	n := New(c)
	base := n.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		for i := range 2 {
			if err := c.Sleep(r.Context(), time.Second); err != nil {
				return
			}
			fmt.Fprintf(w, "chunk-%d\n", i)
		}
		_ = c.Sleep(r.Context(), time.Hour)
	}))
	var got []string
	var err error
	c.Run(func() {
		ctx, cancel := c.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		got, err = stampedLines(t, c, n, ctx, base)
	})
	if s := strings.Join(got, ","); s != "chunk-0@1s read@2.5s,chunk-1@2s read@2.5s" {
		t.Errorf("got %s", s)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the deadline's", err)
	}
}
