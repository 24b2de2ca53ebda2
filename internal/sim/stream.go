package sim

import (
	"context"
	"net/http"
	"strconv"
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
	s  *Sim
	w  http.ResponseWriter
	rc *http.ResponseController
	// fl is w when it flushes itself (an http.Flusher without FlushError,
	// which http.ResponseController would try first): a token's flush then
	// calls it without the controller's search of w's interfaces.
	fl           http.Flusher
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
			buf = appendUsageChunk(buf, resp, r.usage())
		}
		buf = append(buf, "data: [DONE]\n\n"...)
	}
	st.buf = buf
	if _, err := st.w.Write(buf); err != nil {
		return err
	}
	if st.fl != nil {
		st.fl.Flush()
	} else if err := st.rc.Flush(); err != nil {
		return err
	}
	if first {
		r.life.met.apiTTFT.Observe((st.s.clock.Now() - st.began).Seconds())
	}
	return nil
}

// appendUsageChunk appends a stream's usage chunk: the bytes json.Marshal
// writes for it (a test compares), without reflection.
func appendUsageChunk(buf []byte, resp *response, u usage) []byte {
	buf = append(buf, `data: {"id":`...)
	buf = appendJSONString(buf, resp.id)
	buf = append(buf, `,"object":"chat.completion.chunk","created":`...)
	buf = strconv.AppendInt(buf, resp.created, 10)
	buf = append(buf, `,"model":`...)
	buf = appendJSONString(buf, resp.model)
	buf = append(buf, `,"choices":[],"usage":{"prompt_tokens":`...)
	buf = strconv.AppendInt(buf, int64(u.PromptTokens), 10)
	buf = append(buf, `,"total_tokens":`...)
	buf = strconv.AppendInt(buf, int64(u.TotalTokens), 10)
	buf = append(buf, `,"completion_tokens":`...)
	buf = strconv.AppendInt(buf, int64(u.CompletionTokens), 10)
	buf = append(buf, `,"prompt_tokens_details":{"cached_tokens":`...)
	buf = strconv.AppendInt(buf, int64(u.PromptTokensDetails.CachedTokens), 10)
	return append(buf, "}}}\n\n"...)
}

// stream writes the answer as server-sent events (see streamWriter).
func (s *Sim) stream(ctx context.Context, w http.ResponseWriter, r *request, resp *response, includeUsage bool, began time.Duration) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	st := &streamWriter{s: s, w: w, rc: rc, r: r, resp: resp, includeUsage: includeUsage, began: began, buf: make([]byte, 0, 8192)}
	if _, ok := w.(interface{ FlushError() error }); !ok {
		st.fl, _ = w.(http.Flusher)
	}
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
