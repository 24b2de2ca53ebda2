package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/transport"
)

// Client streams chat completions from an OpenAI-compatible endpoint and
// reports what it saw. It is the load generator's hot path: it decodes only
// the final usage chunk and any error with encoding/json, and scans the token
// chunks in between for the few bytes it needs.
type Client struct {
	url     string
	model   string
	http    *http.Client
	bufs    sync.Pool // request bodies
	readers sync.Pool // *bufio.Reader over response bodies
}

// NewClient returns a client for base (e.g. http://127.0.0.1:8000) and model.
func NewClient(base, model string) *Client { return NewClientConn(base, model, transport.Conn{}) }

// NewClientConn is NewClient for a server that wants credentials or its own
// TLS: every request carries conn's headers.
func NewClientConn(base, model string, conn transport.Conn) *Client {
	tr := &http.Transport{
		Proxy:               nil, // traffic goes only where the run file says
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
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
		readers: sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32*1024) }},
	}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Result is what one streamed request returned.
type Result struct {
	Status               int
	PromptTokens, Cached int
	OutputTokens         int
	Chunks               int // chunks that carried at least one token
	First, Last          time.Time
	Error, Detail        string
}

// Stream sends one chat completion whose single user message is prompt,
// capped at maxTokens, and reads the stream until [DONE]. deadline is the
// wall-clock time the request may take; the parent ctx being cancelled makes
// the result an abort.
func (c *Client) Stream(ctx context.Context, prompt []byte, maxTokens int, deadline time.Duration) (res Result) {
	buf := c.bufs.Get().(*bytes.Buffer)
	defer c.bufs.Put(buf)
	buf.Reset()
	c.body(buf, prompt, maxTokens)

	rctx, cancel := context.WithTimeout(ctx, deadline)
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
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.url, bytes.NewReader(buf.Bytes()))
	if err != nil {
		return fail(ErrConnect, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
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
		detail, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		class := ErrServer
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			class = ErrRefused
		}
		return fail(class, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(detail)))
	}
	done, err := c.read(resp.Body, &res)
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

func writeJSONString[T string | []byte](buf *bytes.Buffer, s T) {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b == '"' || b == '\\' || b >= 0x80 {
			enc, _ := json.Marshal(string(s))
			buf.Write(enc)
			return
		}
	}
	buf.WriteByte('"')
	buf.WriteString(string(s))
	buf.WriteByte('"')
}

var (
	dataPrefix  = []byte("data:")
	donePayload = []byte("[DONE]")
	usageKey    = []byte(`"usage":{`)
	errorKey    = []byte(`"error"`)
	contentKey  = []byte(`"content":"`)
	toolKey     = []byte(`"tool_calls":[`)
	reasonKey   = []byte(`"reasoning_content":"`)
)

// read consumes the SSE stream, stamping the first and last token times.
func (c *Client) read(body io.Reader, res *Result) (done bool, err error) {
	br := c.readers.Get().(*bufio.Reader)
	br.Reset(body)
	defer func() { br.Reset(nil); c.readers.Put(br) }()
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 {
			if fin, perr := c.line(line, res); perr != nil || fin {
				return fin, perr
			}
		}
		if err != nil {
			if err == io.EOF {
				return false, nil
			}
			return false, err
		}
	}
}

// line handles one SSE line. A token chunk costs two scans of its bytes:
// one for the token key, one for a usage block.
func (c *Client) line(line []byte, res *Result) (done bool, err error) {
	for n := len(line); n > 0 && (line[n-1] == '\n' || line[n-1] == '\r'); n = len(line) {
		line = line[:n-1]
	}
	if !bytes.HasPrefix(line, dataPrefix) {
		return false, nil // blank separators, comments, event: lines
	}
	p := line[len(dataPrefix):]
	for len(p) > 0 && p[0] == ' ' {
		p = p[1:]
	}
	if bytes.Equal(p, donePayload) {
		return true, nil
	}
	token := hasToken(p)
	if token {
		now := time.Now()
		if res.Chunks == 0 {
			res.First = now
		}
		res.Last = now
		res.Chunks++
	}
	if bytes.Contains(p, usageKey) {
		var u struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				CompletionTokens    int `json:"completion_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(p, &u); err != nil {
			return false, fmt.Errorf("bad usage chunk: %v", err)
		}
		res.PromptTokens = u.Usage.PromptTokens
		res.OutputTokens = u.Usage.CompletionTokens
		if d := u.Usage.PromptTokensDetails; d != nil {
			res.Cached = d.CachedTokens
		}
	} else if !token && (bytes.HasPrefix(p, []byte(`{"error"`)) || (bytes.Contains(p, errorKey) && !bytes.Contains(p, []byte(`"choices"`)))) {
		return false, fmt.Errorf("error in stream: %s", truncate(p, 300))
	}
	return false, nil
}

// hasToken reports whether a chunk carries output: non-empty content,
// reasoning content, or a tool call delta.
func hasToken(p []byte) bool {
	if i := bytes.Index(p, contentKey); i >= 0 && i+len(contentKey) < len(p) && p[i+len(contentKey)] != '"' {
		return true
	}
	if i := bytes.Index(p, reasonKey); i >= 0 && i+len(reasonKey) < len(p) && p[i+len(reasonKey)] != '"' {
		return true
	}
	return bytes.Contains(p, toolKey)
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
