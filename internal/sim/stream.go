package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// streamWriter writes one streamed answer as server-sent events, one chunk
// per token.
//
// On a wall clock the request's handler goroutine owns it: woken at every
// token, it writes all tokens produced since its last write at once. On a
// virtual clock the engine writes each token's chunk itself as it lands the
// iteration (engine.hand), so a token costs no wake of the handler: only one
// goroutine runs at a time there and the in-memory response never blocks,
// so the chunk leaves at the same modelled instant, in the same order and
// with the same bytes as the handler would have written it. The handler
// still writes the last token (with the usage chunk and [DONE]) and still
// waits on its context, so a client that leaves aborts the request at the
// same modelled instant.
type streamWriter struct {
	s            *Sim
	w            http.ResponseWriter
	flush        func() error
	r            *request
	resp         *response
	includeUsage bool
	began        time.Duration // the handler's start, for the API's TTFT
	buf          []byte
	sent         int // tokens written
	// closed says the engine must not write any more: a write failed (the
	// handler is poked to abort) or the handler returned.
	closed bool
}

// write sends the tokens from sent up to n (and, once n reaches maxTokens,
// the usage chunk and [DONE]) in one write and flushes it. The modelled time
// from began to the first token's chunk flushed is observed as the API's TTFT.
func (st *streamWriter) write(n int) error {
	r, resp := st.r, st.resp
	buf := st.buf[:0]
	first := st.sent == 0
	if first {
		buf = append(buf, resp.head...)
		buf = append(buf, `"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	for ; st.sent < n; st.sent++ {
		buf = append(buf, resp.head...)
		buf = st.s.appendDelta(buf, r, st.sent)
		if st.sent == r.maxTokens-1 {
			buf = append(buf, `},"logprobs":null,"finish_reason":"`...)
			buf = append(buf, r.finish...)
			buf = append(buf, `"}]}`+"\n\n"...)
		} else {
			buf = append(buf, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		}
	}
	if st.sent == r.maxTokens {
		if st.includeUsage {
			b, _ := json.Marshal(struct {
				ID      string   `json:"id"`
				Object  string   `json:"object"`
				Created int64    `json:"created"`
				Model   string   `json:"model"`
				Choices []string `json:"choices"`
				Usage   usage    `json:"usage"`
			}{resp.id, "chat.completion.chunk", resp.created, resp.model, []string{}, r.usage()})
			buf = append(buf, "data: "...)
			buf = append(buf, b...)
			buf = append(buf, "\n\n"...)
		}
		buf = append(buf, "data: [DONE]\n\n"...)
	}
	st.buf = buf
	if _, err := st.w.Write(buf); err != nil {
		return err
	}
	if err := st.flush(); err != nil {
		return err
	}
	if first {
		r.life.met.apiTTFT.Observe((st.s.clock.Now() - st.began).Seconds())
	}
	return nil
}

// stream writes the answer as server-sent events (see streamWriter).
func (s *Sim) stream(ctx context.Context, w http.ResponseWriter, r *request, resp *response, includeUsage bool, began time.Duration) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	st := &streamWriter{s: s, w: w, flush: flusher(w, rc), r: r, resp: resp, includeUsage: includeUsage, began: began, buf: make([]byte, 0, 8192)}
	if s.clock.Virtual() && !s.handlerWrites {
		// The engine cannot land an iteration before this goroutine waits,
		// so it sees r.direct from the first token on.
		r.direct = st
		defer func() { st.closed = true }()
		s.streamLast(ctx, st)
		return
	}
	for st.sent < r.maxTokens {
		n, err := s.waitTokens(ctx, r, st.sent)
		if err != nil {
			return
		}
		if err := st.write(n); err != nil {
			s.abort(r)
			return
		}
		if st.sent < r.maxTokens && s.flush > 0 {
			time.Sleep(s.flush)
		}
	}
}

// flusher is how a stream's writes are flushed: by the writer's own method
// when it has one, which http.ResponseController looks for first, so a
// token's flush does not search the writer's interfaces again; else by the
// controller, which searches the writers it wraps.
func flusher(w http.ResponseWriter, rc *http.ResponseController) func() error {
	switch f := w.(type) {
	case interface{ FlushError() error }:
		return f.FlushError
	case http.Flusher:
		return func() error { f.Flush(); return nil }
	}
	return rc.Flush
}

// streamLast is the handler's part of a stream the engine writes: it waits
// for the last token and writes it, or for the engine's write to fail (and
// aborts), or for the client to leave (and aborts), or for the engine to stop.
func (s *Sim) streamLast(ctx context.Context, st *streamWriter) {
	r := st.r
	for {
		if st.closed {
			s.abort(r)
			return
		}
		if int(r.produced.Load()) >= r.maxTokens {
			break
		}
		i, err := s.clock.WaitFor(ctx, "sim answer tokens", -1, r.notify, r.life.stopped)
		if err != nil {
			s.abort(r)
			return
		}
		if i == 1 && !st.closed && int(r.produced.Load()) < r.maxTokens {
			return // the engine stopped; what it produced is written
		}
	}
	if err := st.write(r.maxTokens); err != nil {
		s.abort(r)
	}
}

// hand passes r's newest token on (under the engine's turn): the engine
// writes it into r's stream when the stream is its to write, else it wakes
// the handler, which a non-streamed answer needs only at its last token.
func (e *engine) hand(r *request) {
	last := r.generated >= r.maxTokens
	if st := r.direct; st != nil && !last {
		if st.closed {
			return
		}
		if err := st.write(r.generated); err != nil {
			st.closed = true
			r.notify.Poke()
		}
		return
	}
	if r.quiet && !last {
		return
	}
	r.notify.Poke()
}
