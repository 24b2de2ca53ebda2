package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// MaxSSELine is the longest SSE line (and the longest event's data) the
// client accepts: 16 MiB, far above any token chunk (a few hundred bytes)
// and any final usage chunk. A longer line is a stream error, so a server
// that never ends its line cannot make the client buffer without bound.
const MaxSSELine = 16 << 20

var donePayload = []byte("[DONE]")

// sse reads one response's server-sent events into a Result. It follows
// the SSE format as OpenAI-compatible servers use it: a "data:" line (one
// space after the colon or none) carries one chunk; comments (": ping"),
// "event:", "id:" and "retry:" lines carry none; lines end in LF or CRLF; a
// blank line ends an event. A data line that parses on its own is one chunk
// (every server sends one chunk per line, and some no blank line between
// them); one that does not is joined with the event's next data lines and
// judged when the event ends, as the format prescribes for multi-line data,
// and is a stream error if the joined data does not parse either.
type sse struct {
	res *Result
	now func() time.Time // stamps tokens: the client's clock
	// pending holds an event's data that did not parse line by line.
	pending    []byte
	hasPending bool
	// errorEvent: the current event is named "error"; its data is one.
	errorEvent bool
	memo       fastMemo
}

// stampedBody is a response body that says when the bytes its last Read
// returned were written (memnet's, on the run's clock): stamped by that, a
// token needs no wake of the client at its instant (memnet.respBody.Stamped).
type stampedBody interface {
	Stamped() func() time.Time
}

// read consumes the SSE stream, stamping the first and last token times:
// with the instant the connection's read brought a token's line when conn
// knows it (on the wall clock), else with the client's clock as the line
// is parsed.
func (c *Client) read(body io.Reader, res *Result, conn *connTrace) (done bool, err error) {
	br := c.readers.Get().(*bufio.Reader)
	br.Reset(body)
	defer func() { br.Reset(nil); c.readers.Put(br) }()
	now := c.now
	if sb, ok := body.(stampedBody); ok && c.clock != nil {
		now = sb.Stamped()
	} else if c.clock == nil {
		now = conn.now(now)
	}
	return readSSEAt(br, res, now)
}

// readSSE is read over a bufio.Reader whose buffer is shorter than
// MaxSSELine.
func readSSE(br *bufio.Reader, res *Result) (done bool, err error) {
	return readSSEAt(br, res, time.Now)
}

// readSSEAt is readSSE with tokens stamped by now.
func readSSEAt(br *bufio.Reader, res *Result, now func() time.Time) (done bool, err error) {
	s := sse{res: res, now: now}
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				if len(long)+len(line) > MaxSSELine {
					return false, fmt.Errorf("an SSE line is longer than %d MiB (it starts %q): the server is not sending line-delimited server-sent events", MaxSSELine>>20, head(long, 40))
				}
				long = grow(long, len(line))
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 {
			if fin, perr := s.line(line); perr != nil || fin {
				return fin, perr
			}
		}
		if err != nil {
			if err == io.EOF {
				// An event the stream did not end is dropped, as the format
				// says; data of it that does not parse is reported.
				if s.hasPending {
					if _, perr := classifyFull(s.pending); perr != nil {
						return false, fmt.Errorf("the stream ended inside an event whose data %q is not a JSON object (%v)", head(s.pending, 80), perr)
					}
				}
				return false, nil
			}
			return false, err
		}
	}
}

// line handles one SSE line, its line ending included.
func (s *sse) line(line []byte) (done bool, err error) {
	for n := len(line); n > 0 && (line[n-1] == '\n' || line[n-1] == '\r'); n = len(line) {
		line = line[:n-1]
	}
	if len(line) == 0 {
		return s.endEvent()
	}
	switch line[0] {
	case 'd':
		if len(line) >= 5 && string(line[:5]) == "data:" {
			return s.data(trimSpace(line[5:]))
		}
	case 'e':
		if len(line) >= 6 && string(line[:6]) == "event:" {
			s.errorEvent = string(trimSpace(line[6:])) == "error"
		}
	}
	return false, nil // comments, id:, retry: and fields SSE clients ignore
}

// data handles one data line's payload.
func (s *sse) data(p []byte) (done bool, err error) {
	if s.hasPending {
		if len(s.pending)+1+len(p) > MaxSSELine {
			return false, fmt.Errorf("an SSE event's data is longer than %d MiB (it starts %q)", MaxSSELine>>20, head(s.pending, 40))
		}
		s.pending = append(append(s.pending, '\n'), p...)
		return false, nil
	}
	if len(p) == 0 {
		return false, nil
	}
	if s.errorEvent {
		return false, fmt.Errorf("error event in stream: %s", truncate(p, 300))
	}
	if bytes.Equal(p, donePayload) {
		return true, nil
	}
	c, ok := classifyFast(p, &s.memo)
	if !ok {
		if c, err = classifyFull(p); err != nil {
			if errors.Is(err, errNotJSON) || isSyntaxError(err) {
				// It may be the first line of a multi-line event.
				s.pending = append(s.pending[:0], p...)
				s.hasPending = true
				return false, nil
			}
			return false, fmt.Errorf("chunk %q: %v", head(p, 80), err)
		}
	}
	return false, s.apply(c, p)
}

// endEvent ends the current event: data that waited for it is judged now.
func (s *sse) endEvent() (done bool, err error) {
	s.errorEvent = false
	if !s.hasPending {
		return false, nil
	}
	p := s.pending
	s.pending, s.hasPending = nil, false
	c, err := classifyFull(p)
	if err != nil {
		return false, fmt.Errorf("data %q is not a JSON object (%v): the server must send one JSON object per SSE data event", head(p, 80), err)
	}
	return false, s.apply(c, p)
}

// apply records one classified chunk; p is its payload, for errors.
func (s *sse) apply(c chunk, p []byte) error {
	if c.failed {
		return fmt.Errorf("error in stream: %s", truncate(p, 300))
	}
	res := s.res
	if c.token() {
		now := s.now()
		if res.Chunks == 0 {
			res.First = now
		}
		res.Last = now
		res.Chunks++
		if c.answer {
			if res.AnswerChunks == 0 {
				res.FirstAnswer = now
			}
			res.AnswerChunks++
		} else {
			res.ReasoningChunks++
		}
	}
	if c.usage {
		res.PromptTokens, res.OutputTokens, res.Cached, res.ReasoningTokens = c.prompt, c.completion, c.cached, c.reasonToken
	}
	return nil
}

// isSyntaxError reports whether err says the bytes are not JSON.
func isSyntaxError(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

// grow makes room for n more bytes in b, doubling its capacity up to
// MaxSSELine, so a line at the limit costs about twice the limit in
// allocations, not the many copies append's slower growth of large slices
// would make.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	c := min(max(2*cap(b), len(b)+n, 64<<10), MaxSSELine)
	c = max(c, len(b)+n)
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

// trimSpace trims the spaces and tabs around an SSE field value.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// head is the first n bytes of b, for error details.
func head(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
