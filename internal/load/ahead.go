package load

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/headroom-bench/headroom/internal/prompt"
)

// readAheader is a transport that reads a request's body, and has its
// server prepare it, before the request is sent (memnet on a virtual
// clock: the work runs on another core while the clock goes on).
type readAheader interface {
	ReadAhead(req *http.Request) (with func(context.Context) context.Context, discard func())
}

// Ahead is a request read ahead of its send (ReadAhead); StreamPromptAhead
// sends it. Discard it when it will not be sent.
type Ahead struct {
	p         Prompt
	maxTokens int
	with      func(context.Context) context.Context
	discard   func()
}

// ReadAhead starts reading the request StreamPrompt(ctx, p, maxTokens, ...)
// would send, where the transport can (an in-memory network on a virtual
// clock); nil where it cannot. The request sent later is the same bytes:
// nothing it carries depends on when it is sent.
func (c *Client) ReadAhead(p Prompt, maxTokens int) *Ahead {
	ra, ok := c.http.Transport.(readAheader)
	if !ok || c.clock == nil || !c.clock.Virtual() {
		return nil
	}
	var buf bytes.Buffer // the transport reads it later: not the pool's
	body := c.promptBody(&buf, p, maxTokens)
	req, err := http.NewRequest(http.MethodPost, c.url, body)
	if err != nil {
		return nil
	}
	req.ContentLength = int64(body.Len())
	with, discard := ra.ReadAhead(req)
	if with == nil {
		return nil
	}
	return &Ahead{p: p, maxTokens: maxTokens, with: with, discard: discard}
}

// Discard lets a request read ahead go; after its send it does nothing.
func (a *Ahead) Discard() {
	if a != nil {
		a.discard()
	}
}

// StreamPromptAhead is StreamPrompt with a request read ahead (used when it
// is p's with maxTokens, else discarded) and onHead, called (when not nil)
// once the answer's head has come back, where a caller starts reading its
// next request ahead.
func (c *Client) StreamPromptAhead(ctx context.Context, p Prompt, maxTokens int, deadline time.Duration, a *Ahead, onHead func()) Result {
	if a != nil {
		if a.p == p && a.maxTokens == maxTokens {
			ctx = a.with(ctx)
		}
		defer a.Discard()
	}
	return c.streamPrompt(ctx, p, maxTokens, deadline, onHead)
}

// aheadKey names a turn of one play of a lane (marker) read ahead.
type aheadKey struct {
	marker uint64
	turn   int
}

// aheadTurn is a turn's prompt and its request read ahead.
type aheadTurn struct {
	text  *prompt.Text
	ahead *Ahead
}

// readAhead reads turn i of s's play (marker) ahead of its send, where the
// client's transport can: on a virtual clock, a lane starts this once its
// last turn's answer has begun, so the request's body is written, and the
// simulator's scan of it done, on another core by the time it is sent.
// What is sent, and when, does not change.
func (g *Generator) readAhead(s Session, marker uint64, i int) {
	t := s.Turns[i]
	b := g.o.Prompts
	if t.BlockSize > 0 {
		b.BlockSize = t.BlockSize
	}
	text := b.Text(s.ID, marker, t.HashIDs, t.In)
	a := g.o.Client.ReadAhead(text, max(t.Out, 1))
	if a == nil {
		return
	}
	g.aheadMu.Lock()
	defer g.aheadMu.Unlock()
	if g.aheads == nil {
		g.aheads = map[aheadKey]aheadTurn{}
	}
	k := aheadKey{marker, i}
	if old, ok := g.aheads[k]; ok {
		old.ahead.Discard()
	}
	g.aheads[k] = aheadTurn{text: text, ahead: a}
}

// takeAhead returns turn i's prompt and request read ahead, when one was
// and the send is the one it was read for (the first try of a turn, with
// maxTokens); one read for another send is let go.
func (g *Generator) takeAhead(marker uint64, i int, normal bool, maxTokens int) (*prompt.Text, *Ahead) {
	g.aheadMu.Lock()
	k := aheadKey{marker, i}
	at, ok := g.aheads[k]
	delete(g.aheads, k)
	g.aheadMu.Unlock()
	if !ok {
		return nil, nil
	}
	if !normal || at.ahead.maxTokens != maxTokens {
		at.ahead.Discard()
		return nil, nil
	}
	return at.text, at.ahead
}

// dropAheads lets go of every turn of a play (marker) read ahead and not
// sent: the play ended before them.
func (g *Generator) dropAheads(marker uint64) {
	g.aheadMu.Lock()
	defer g.aheadMu.Unlock()
	for k, at := range g.aheads {
		if k.marker == marker {
			at.ahead.Discard()
			delete(g.aheads, k)
		}
	}
}
