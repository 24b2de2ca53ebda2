package sim

import (
	"bytes"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// gatewayWriter watches an answer on its way to the caller: its status, when
// the first token and the last write went out, and the tokens it carried.
// It sees every streamed chunk, so what it looks for in one is found by a
// rare byte (countFinish, hasDone) and the end of the answer is kept by
// appending (keep), not through bytes.Count on a quote, bytes.Contains on a
// "d" and a bytes.Buffer cut on every write.
type gatewayWriter struct {
	http.ResponseWriter
	clock     *timescale.Clock
	code      int
	first     time.Time // first write with a token
	last      time.Time
	chunks    int    // streamed chunks with a finish_reason member (role chunk included)
	tail      []byte // ends with the last tailBytes of the answer, where usage sits (see end)
	done      bool   // the stream ended with [DONE], or a plain answer was written
	aborted   bool
	streaming bool
}

// tailBytes is how much of an answer's end tokens reads.
const tailBytes = 4096

func (g *gatewayWriter) WriteHeader(code int) {
	g.code = code
	g.streaming = bytes.HasPrefix([]byte(g.Header().Get("Content-Type")), []byte("text/event-stream"))
	g.ResponseWriter.WriteHeader(code)
}

var (
	finishMember = []byte(`"finish_reason"`)
	finishName   = finishMember[1 : len(finishMember)-1]
	doneLine     = []byte("data: [DONE]")
	doneWord     = doneLine[len("data: ["):] // DONE]
)

func (g *gatewayWriter) Write(b []byte) (int, error) {
	now := g.clock.Time()
	if g.first.IsZero() {
		g.first = now
	}
	g.last = now
	g.chunks += countFinish(b)
	g.keep(b)
	if !g.streaming || hasDone(b) {
		g.done = true
	}
	return g.ResponseWriter.Write(b)
}

// keep appends b to the tail, first dropping what no longer falls in the
// last tailBytes when the tail would pass twice that.
func (g *gatewayWriter) keep(b []byte) {
	if g.tail == nil {
		g.tail = make([]byte, 0, 2*tailBytes) // what it grows to in a long answer
	}
	if len(b) >= tailBytes {
		g.tail = append(g.tail[:0], b[len(b)-tailBytes:]...)
		return
	}
	if len(g.tail)+len(b) > 2*tailBytes {
		n := copy(g.tail, g.tail[len(g.tail)-(tailBytes-len(b)):])
		g.tail = g.tail[:n]
	}
	g.tail = append(g.tail, b...)
}

// end is the last tailBytes of the answer (all of it when shorter).
func (g *gatewayWriter) end() []byte { return g.tail[max(0, len(g.tail)-tailBytes):] }

// countFinish is bytes.Count(b, finishMember): the leftmost matches that do
// not overlap, found by the member's name with a quote on each side.
func countFinish(b []byte) int {
	n, from := 0, 0 // from: where the next match may start
	for k := 1; k < len(b); {
		j := bytes.Index(b[k:], finishName)
		if j < 0 {
			break
		}
		at := k + j
		if at-1 >= from && b[at-1] == '"' && at+len(finishName) < len(b) && b[at+len(finishName)] == '"' {
			n++
			from = at + len(finishName) + 1
			k = from + 1
			continue
		}
		k = at + 1
	}
	return n
}

// hasDone is bytes.Contains(b, doneLine), found by its rare end.
func hasDone(b []byte) bool {
	lead := len(doneLine) - len(doneWord)
	for k := lead; k < len(b); {
		j := bytes.Index(b[k:], doneWord)
		if j < 0 {
			return false
		}
		at := k + j
		if bytes.Equal(b[at-lead:at], doneLine[:lead]) {
			return true
		}
		k = at + 1
	}
	return false
}

func (g *gatewayWriter) Flush() {
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (g *gatewayWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

var (
	promptTokensRe     = regexp.MustCompile(`"prompt_tokens":(\d+)`)
	completionTokensRe = regexp.MustCompile(`"completion_tokens":(\d+)`)
)

// tokens reads the usage the answer reported, or counts streamed chunks
// (without the role chunk) when it reported none.
func (g *gatewayWriter) tokens() (in, out int, ok bool) {
	t := g.end()
	pm, cm := promptTokensRe.FindSubmatch(t), completionTokensRe.FindSubmatch(t)
	if pm != nil && cm != nil {
		in, _ = strconv.Atoi(string(pm[1]))
		out, _ = strconv.Atoi(string(cm[1]))
		return in, out, true
	}
	if g.streaming && g.chunks > 1 {
		return 0, g.chunks - 1, false
	}
	return 0, 0, false
}

// routedChat is the router's reading of a chat body (fastChat's), which the
// copy it picked takes instead of reading and scanning the body again: the
// same bytes give the same request and the same scan.
type routedChat struct {
	body      []byte
	req       chatRequest
	scan      *promptScan
	blockSize int
	// plannedBy, when set, is the engine whose Prepare planned the reply
	// too (planReply depends on the body and the engine's seed alone)
	plannedBy *Sim
	rep       *reply
	repErr    error
}

// routedKey is the request context key of a *routedChat.
type routedKey struct{}

// routed returns the router's reading of r's body for a copy scanning with
// blockSize, if it has one.
func routed(r *http.Request, blockSize int) *routedChat {
	rc, _ := r.Context().Value(routedKey{}).(*routedChat)
	if rc == nil {
		rc, _ = memnet.Prepared(r.Context()).(*routedChat)
	}
	if rc == nil || rc.blockSize != blockSize {
		return nil
	}
	return rc
}

// preparing is an engine's handler on an in-memory network: a chat
// request's body is read and scanned off the clock, before its handler's
// turn (memnet.Preparer), the reading the handler would make itself (the
// scan cache's resumed scans are the full scan's to the bit).
type preparing struct {
	http.Handler
	s *Sim
}

// Prepare reads a chat completion body as the handler does; nil for
// anything else, or a body the fast path does not read.
func (p preparing) Prepare(req *http.Request, body []byte) any {
	if !preparable(req, body) {
		return nil
	}
	bs := p.s.prof.BlockSize
	cr, scan, ok := p.s.scans.fastChat(body, bs)
	if !ok {
		return nil
	}
	rc := &routedChat{body: body, req: cr, scan: scan, blockSize: bs, plannedBy: p.s}
	rc.rep, rc.repErr = p.s.planReply(&rc.req, p.s.replySeed(scan))
	return rc
}

// clusterPreparing is a prefix-affinity gateway's handler on an in-memory
// network: a chat body is read and its prompt scanned off the clock, before
// the handler's turn (memnet.Preparer); the routing itself, which reads and
// writes the affinity table and the copies' loads, stays on the clock.
type clusterPreparing struct {
	http.Handler
	c *Cluster
}

// clusterPrep is a chat body read ahead and the router's scan of it.
type clusterPrep struct {
	body []byte
	scan *promptScan
	rc   *routedChat
}

func (p clusterPreparing) Prepare(req *http.Request, body []byte) any {
	if !preparable(req, body) {
		return nil
	}
	scan, rc := p.c.scanPrompt(body)
	return &clusterPrep{body: body, scan: scan, rc: rc}
}

// preparable reports whether a request read ahead is a chat completion
// whose body the handler would read (not one past maxBodyBytes, which it
// refuses).
func preparable(req *http.Request, body []byte) bool {
	return req.Method == http.MethodPost && req.URL.Path == "/v1/chat/completions" && int64(len(body)) <= maxBodyBytes
}
