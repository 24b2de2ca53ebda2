package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/transport"
)

// Client streams chat completions from an OpenAI-compatible endpoint and
// reports what it saw. It is the load generator's hot path: compact token
// chunks are classified in one pass over their bytes (stream_fast.go), and
// only the usage chunk, errors and chunks in any other layout are decoded
// with encoding/json (stream_chunk.go).
type Client struct {
	url     string
	model   string
	http    *http.Client
	bufs    sync.Pool // request bodies
	readers sync.Pool // *bufio.Reader over response bodies
	prompts sync.Pool // *[]byte: the text of a Prompt whose reader had no room for it
	clock   *timescale.Clock
}

// UseClock makes the client stamp tokens and time its deadlines on clock
// (a virtual one runs them in modelled time). Without it, the wall clock.
func (c *Client) UseClock(clock *timescale.Clock) { c.clock = clock }

// now stamps a token.
func (c *Client) now() time.Time {
	if c.clock == nil {
		return time.Now()
	}
	return c.clock.Time()
}

// NewClient returns a client for base (e.g. http://127.0.0.1:8000) and model.
func NewClient(base, model string) *Client { return NewClientConn(base, model, transport.Conn{}) }

// NewClientConn is NewClient for a server that wants credentials or its own
// TLS: every request carries conn's headers.
func NewClientConn(base, model string, conn transport.Conn) *Client {
	tr := &http.Transport{
		Proxy:               nil, // traffic goes only where the run file says
		DialContext:         stampDial((&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &Client{
		url:     base + "/v1/chat/completions",
		model:   model,
		http:    &http.Client{Transport: conn.Wrap(tr)},
		bufs:    sync.Pool{New: func() any { return new(bytes.Buffer) }},
		readers: sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readerSize) }},
		prompts: sync.Pool{New: func() any { return new([]byte) }},
	}
}

// readerSize is the buffer a response's stream is read through: many token
// chunks (a few hundred bytes each), and a longer line is read in pieces
// (readSSEAt). Every request in flight holds one, so it is kept small: a
// fleet has thousands of requests waiting for their first token.
const readerSize = 4 << 10

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Result is what one streamed request returned.
type Result struct {
	Status               int
	PromptTokens, Cached int
	OutputTokens         int
	// ReasoningTokens is usage.completion_tokens_details.reasoning_tokens
	// (SGLang: usage.reasoning_tokens) when the server sends it, else 0.
	ReasoningTokens int
	Chunks          int // chunks that carried at least one token of any kind
	// ReasoningChunks carried only reasoning (delta.reasoning or
	// delta.reasoning_content); AnswerChunks carried answer (content, text,
	// refusal or a tool call), reasoning beside it or not. They sum to Chunks.
	ReasoningChunks, AnswerChunks int
	// First and Last are the first and last token of any kind: a reasoning
	// model's first thought is its first token, as engines count TTFT. On
	// the wall clock they are when the token's bytes reached the socket
	// (the kernel's receive time where it gives one, stream_stamp.go).
	First, Last time.Time
	// FirstAnswer is the first answer token; zero when none came.
	FirstAnswer   time.Time
	Error, Detail string
	// RetryAfter is the wait a refusal's Retry-After header asked for
	// (retryAfter); 0 when it sent none.
	RetryAfter time.Duration
}

// Stream sends one chat completion whose single user message is prompt,
// capped at maxTokens, and reads the stream until [DONE]. deadline is the
// wall-clock time the request may take; the parent ctx being cancelled makes
// the result an abort. prompt is read, not copied, while the request is sent:
// the caller keeps it unchanged until Stream returns.
func (c *Client) Stream(ctx context.Context, prompt []byte, maxTokens int, deadline time.Duration) (res Result) {
	return c.StreamReleasing(ctx, prompt, maxTokens, deadline, nil)
}

// StreamReleasing is Stream that calls release (when not nil) as soon as
// prompt is read no more: the request body was sent and closed, and the
// response head came back, so no resend can read it again. A caller that
// holds many requests in flight (a fleet of sessions waiting in queues)
// can reuse the prompt's buffer then instead of when the answer ends.
// release is called at most once, from any goroutine, and not at all when
// the request could not be made.
func (c *Client) StreamReleasing(ctx context.Context, prompt []byte, maxTokens int, deadline time.Duration, release func()) (res Result) {
	buf := c.bufs.Get().(*bytes.Buffer)
	defer c.bufs.Put(buf)
	buf.Reset()
	body := c.requestBody(buf, prompt, maxTokens)
	if release != nil {
		body.rel = &releaser{f: release}
		body.rel.n.Store(2) // this body, and the round trip
	}
	return c.stream(ctx, body, deadline, nil)
}

// StreamPrompt is Stream for a prompt that is written as the request body
// is read, not before: a caller with many requests waiting to be read
// (the lanes of a fleet that all send at one modelled instant, each
// handler reading its body in turn) holds no prompt text for them. The
// body is written straight into a reader's buffer that has room for it
// (an in-memory server's), else into a buffer of the client's that goes
// back once it is read. p's bytes must stand in a JSON string as they
// are (prompt.Text's do); they are not checked.
func (c *Client) StreamPrompt(ctx context.Context, p Prompt, maxTokens int, deadline time.Duration) (res Result) {
	return c.streamPrompt(ctx, p, maxTokens, deadline, nil)
}

func (c *Client) streamPrompt(ctx context.Context, p Prompt, maxTokens int, deadline time.Duration, onHead func()) (res Result) {
	buf := c.bufs.Get().(*bytes.Buffer)
	defer c.bufs.Put(buf)
	buf.Reset()
	return c.stream(ctx, c.promptBody(buf, p, maxTokens), deadline, onHead)
}

// stream sends body and reads the answer's stream; onHead, when not nil,
// is called once the answer's head has come back.
func (c *Client) stream(ctx context.Context, body *chatBody, deadline time.Duration, onHead func()) (res Result) {
	var rctx context.Context
	var cancel context.CancelFunc
	if c.clock != nil {
		rctx, cancel = c.clock.WithTimeout(ctx, c.clock.Modelled(deadline))
	} else {
		rctx, cancel = context.WithTimeout(ctx, deadline)
	}
	defer cancel()
	fail := func(class string, err error) Result {
		switch {
		case ctx.Err() != nil:
			class = ErrAborted
		case rctx.Err() != nil:
			class = ErrTimeout
		}
		res.Error = class
		if err != nil {
			res.Detail = err.Error()
		}
		return res
	}
	reqCtx := rctx
	var conn *connTrace
	if c.clock == nil {
		conn = new(connTrace) // stamps come from the connection's reads (stream_stamp.go)
		reqCtx = conn.with(rctx)
	}
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, c.url, body)
	if err != nil {
		return fail(ErrConnect, err)
	}
	req.ContentLength = int64(body.Len())
	req.GetBody = func() (io.ReadCloser, error) { return body.again(), nil }
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	body.rel.done()
	if onHead != nil && err == nil {
		onHead()
	}
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return fail(ErrConnect, err)
		}
		return fail(ErrStream, err)
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		res.RetryAfter = retryAfter(resp.Header)
		detail, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		class := ErrServer
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			class = ErrRefused
		}
		return fail(class, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(detail)))
	}
	done, err := c.read(resp.Body, &res, conn)
	if err != nil {
		return fail(ErrStream, err)
	}
	if !done {
		return fail(ErrStream, errors.New("stream ended before data: [DONE]"))
	}
	if res.Chunks == 0 {
		return fail(ErrEmptyAnswer, errors.New("no token arrived"))
	}
	if res.PromptTokens == 0 {
		return fail(ErrNoUsage, errors.New("no usage chunk: the server must honour stream_options.include_usage"))
	}
	return res
}

// body writes the request JSON. Prompt text is escaped only when it holds a
// byte JSON needs escaped; the placeholder text never does.
func (c *Client) body(buf *bytes.Buffer, prompt []byte, maxTokens int) {
	buf.WriteString(`{"model":`)
	writeJSONString(buf, c.model)
	buf.WriteString(`,"messages":[{"role":"user","content":`)
	writeJSONString(buf, prompt)
	buf.WriteString(`}],"max_tokens":`)
	buf.WriteString(strconv.Itoa(maxTokens))
	buf.WriteString(`,"stream":true,"stream_options":{"include_usage":true}}`)
}

// requestBody is the request JSON that body writes, as a reader. A prompt
// with nothing to escape (the placeholder text) is not copied: the body
// reads the JSON around it from buf and the prompt from its own slice, so
// a long prompt costs one pass that checks it and none that copies it.
func (c *Client) requestBody(buf *bytes.Buffer, prompt []byte, maxTokens int) *chatBody {
	if !plainJSON(prompt) || !plainJSON([]byte(c.model)) {
		c.body(buf, prompt, maxTokens)
		return &chatBody{parts: [3][]byte{buf.Bytes()}}
	}
	head, tail := c.around(buf, maxTokens)
	return &chatBody{parts: [3][]byte{head, prompt, tail}}
}

// around writes the JSON before and after a plain prompt to buf.
func (c *Client) around(buf *bytes.Buffer, maxTokens int) (head, tail []byte) {
	buf.WriteString(`{"model":"`)
	buf.WriteString(c.model)
	buf.WriteString(`","messages":[{"role":"user","content":"`)
	n := buf.Len()
	buf.WriteString(`"}],"max_tokens":`)
	buf.WriteString(strconv.Itoa(maxTokens))
	buf.WriteString(`,"stream":true,"stream_options":{"include_usage":true}}`)
	b := buf.Bytes()
	return b[:n:n], b[n:]
}

// chatBody reads its parts one after another. A body made by promptBody
// has no parts[1] until it is read: src writes it then (promptbody.go).
type chatBody struct {
	parts  [3][]byte
	i      int // the part being read
	off    int // read so far of parts[i]
	rel    *releaser
	closed atomic.Bool // the transport may close a body more than once, from its own goroutine

	src  Prompt     // the prompt to write as parts[1]; nil when parts[1] is the text
	plen int        // src's length
	mat  *[]byte    // src's text in a buffer of pool's, while parts[1] reads it
	pool *sync.Pool // of *[]byte
}

// releaser calls f when n, the bodies open and the round trip in flight,
// reaches zero.
type releaser struct {
	n atomic.Int32
	f func()
}

func (r *releaser) done() {
	if r != nil && r.n.Add(-1) == 0 {
		r.f()
	}
}

// Close marks the body sent: the transport closes it once it is written
// or given up.
func (b *chatBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.rel.done()
	}
	return nil
}

// Len is the bytes left to read.
func (b *chatBody) Len() int {
	n := -b.off
	for _, p := range b.parts[b.i:] {
		n += len(p)
	}
	if b.unwritten() {
		n += b.plen
	}
	return n
}

// again is the same body from its start, for a request that is sent again.
func (b *chatBody) again() *chatBody {
	if b.rel != nil {
		b.rel.n.Add(1)
	}
	a := &chatBody{parts: b.parts, rel: b.rel, src: b.src, plen: b.plen, pool: b.pool}
	if b.src != nil {
		a.parts[1] = nil // written again when read: b's may go back to the pool
	}
	return a
}

func (b *chatBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && b.i < len(b.parts) {
		if b.i == 1 && b.unwritten() {
			if len(p)-n >= b.plen {
				if err := b.writePrompt(p[n : n+b.plen]); err != nil {
					return n, err
				}
				n += b.plen
				b.i, b.off = 2, 0
				continue
			}
			if err := b.materialize(); err != nil {
				return n, err
			}
		}
		k := copy(p[n:], b.parts[b.i][b.off:])
		n += k
		b.off += k
		if b.off == len(b.parts[b.i]) {
			b.i, b.off = b.i+1, 0
		}
	}
	if b.i == len(b.parts) {
		b.unmaterialize()
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo writes what is left in at most three writes.
func (b *chatBody) WriteTo(w io.Writer) (int64, error) {
	if b.unwritten() {
		if err := b.materialize(); err != nil {
			return 0, err
		}
	}
	defer b.unmaterialize()
	var total int64
	for ; b.i < len(b.parts); b.i, b.off = b.i+1, 0 {
		if rest := b.parts[b.i][b.off:]; len(rest) > 0 {
			n, err := w.Write(rest)
			total += int64(n)
			b.off += n
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// plainJSON reports whether s can stand in a JSON string as it is: no
// control character, quote, backslash or byte past ASCII (writeJSONString
// hands those to encoding/json). It reads eight bytes at a time.
func plainJSON(s []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// bad flags, in a word's high bits, a byte under 0x20, a zero byte of
	// q or bs (a quote or a backslash) or a high bit set, each exactly.
	bad := func(x uint64) uint64 {
		q, bs := x^(ones*'"'), x^(ones*'\\')
		return ((x-ones*0x20)&^x | (q-ones)&^q | (bs-ones)&^bs | x) & highs
	}
	i := 0
	for ; i+32 <= len(s); i += 32 {
		if bad(binary.LittleEndian.Uint64(s[i:]))|bad(binary.LittleEndian.Uint64(s[i+8:]))|
			bad(binary.LittleEndian.Uint64(s[i+16:]))|bad(binary.LittleEndian.Uint64(s[i+24:])) != 0 {
			return false
		}
	}
	for ; i+8 <= len(s); i += 8 {
		if bad(binary.LittleEndian.Uint64(s[i:])) != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b == '"' || b == '\\' || b >= 0x80 {
			return false
		}
	}
	return true
}

func writeJSONString[T string | []byte](buf *bytes.Buffer, s T) {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b == '"' || b == '\\' || b >= 0x80 {
			enc, _ := json.Marshal(string(s))
			buf.Write(enc)
			return
		}
	}
	buf.WriteByte('"')
	buf.Write([]byte(s))
	buf.WriteByte('"')
}
