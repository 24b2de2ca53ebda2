package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/transport"
)

// countingPrompt is a Prompt that counts its writes and can lie about its
// length.
type countingPrompt struct {
	text   []byte
	lie    int
	writes int
}

func (p *countingPrompt) Len() int { return len(p.text) + p.lie }
func (p *countingPrompt) AppendTo(dst []byte) []byte {
	p.writes++
	return append(dst, p.text...)
}

// The body StreamPrompt sends is byte for byte what body writes for the
// prompt's text: read whole (written straight into the reader's buffer),
// in small reads (through a buffer of the client's, given back at the
// end), written to a writer, again for a resend, with a model name that
// needs escaping, and for an empty prompt; a prompt whose length is wrong
// fails the read.
func TestPromptBodyMatchesBody(t *testing.T) {
	b := prompt.Builder{Seed: 3, Memo: prompt.NewMemo(1 << 20)}
	for _, c := range []struct {
		model string
		text  Prompt
	}{
		{"glm-5.3", b.Text("trace_1", 5, []int64{1, 2, 3, 4}, 300)},
		{"glm-5.3", b.Text("trace_1", 5, []int64{1, 2, 3, 4, 5}, 330)},
		{"glm-5.3", b.Text("trace_1", 5, nil, 0)},
		{`m"x`, b.Text("trace_2", 1, []int64{9}, 70)},
		{"m", &countingPrompt{text: []byte("plain words")}},
	} {
		cl := NewClient("http://127.0.0.1:1", c.model)
		var want, buf bytes.Buffer
		cl.body(&want, c.text.AppendTo(nil), 7)
		body := cl.promptBody(&buf, c.text, 7)
		if body.Len() != want.Len() {
			t.Errorf("%s: Len %d, want %d", c.model, body.Len(), want.Len())
		}
		small, again := body.again(), body.again()
		whole := make([]byte, body.Len())
		if n, err := body.Read(whole); n != len(whole) || err != nil || body.mat != nil {
			t.Errorf("%s: read %d of %d bytes in one read (%v), prompt copied through the client: %v", c.model, n, len(whole), err, body.mat != nil)
		}
		if n, err := body.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("%s: after the body, read %d (%v), want EOF", c.model, n, err)
		}
		var pieces []byte
		p := make([]byte, 3)
		for {
			n, err := small.Read(p)
			pieces = append(pieces, p[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if small.mat != nil || small.parts[1] != nil && small.src != nil {
			t.Errorf("%s: the prompt's buffer was not given back after a read in pieces", c.model)
		}
		var wrote bytes.Buffer
		if _, err := again.WriteTo(&wrote); err != nil {
			t.Fatal(err)
		}
		if string(whole) != want.String() || string(pieces) != want.String() || wrote.String() != want.String() {
			t.Errorf("%s: read %.80s, %.80s and %.80s, want %.80s", c.model, whole, pieces, wrote.Bytes(), want.Bytes())
		}
	}
	// a read that ends with the prompt writes nothing past it
	cl := NewClient("http://127.0.0.1:1", "m")
	var buf bytes.Buffer
	for tokens := 150; tokens < 170; tokens++ {
		// a trace of its own: written straight into the reader's bytes, not copied from the memo
		body := cl.promptBody(&buf, b.Text(fmt.Sprint("trace_", tokens), 2, []int64{4, 5, 6}, tokens), 7)
		upto := len(body.parts[0]) + body.plen
		p := make([]byte, upto, upto+16)
		copy(p[:cap(p)], bytes.Repeat([]byte("#"), cap(p)))
		if n, err := body.Read(p); n != upto || err != nil || string(p[upto:cap(p)]) != "################" {
			t.Errorf("%d tokens: read %d of %d bytes (%v); the 16 bytes past them read %q", tokens, n, upto, err, p[upto:cap(p)])
		}
	}
	for _, size := range []int{0, 4} { // whole, in pieces
		body := cl.promptBody(&buf, &countingPrompt{text: []byte("words"), lie: 1}, 7)
		p := make([]byte, body.Len()+size)
		if size > 0 {
			p = p[:size]
		}
		var err error
		for err == nil {
			_, err = body.Read(p)
		}
		if err == io.EOF {
			t.Errorf("a prompt one byte short of its length was read to the end (reads of %d)", len(p))
		}
	}
}

// On a virtual clock with the in-memory server, a request's prompt is not
// written while the request waits for its handler, and is written once,
// into the handler's own buffer, when the handler reads it.
func TestStreamPromptWritesWhenRead(t *testing.T) {
	clock := timescale.NewVirtual()
	net := memnet.New(clock)
	text := &countingPrompt{text: []byte("a b c")}
	var before int
	var got []byte
	base := net.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// the handler reads the body only after a modelled second
		if err := clock.Sleep(r.Context(), time.Second); err != nil {
			return
		}
		before = text.writes
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	c := NewClientConn(base, "m", transport.Conn{RoundTripper: net.Transport()})
	c.UseClock(clock)
	var res Result
	clock.Run(func() { res = c.StreamPrompt(context.Background(), text, 4, time.Minute) })
	if res.Error != "" {
		t.Fatalf("%s: %s", res.Error, res.Detail)
	}
	if before != 0 || text.writes != 1 || !bytes.Contains(got, []byte(`"content":"a b c"`)) {
		t.Errorf("prompt written %d times before the handler read it, %d in all (want 0 and 1); the handler read %s", before, text.writes, got)
	}
}
