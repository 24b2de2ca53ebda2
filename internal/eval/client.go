package eval

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
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/transport"
)

// DefaultTimeout is the deadline of one eval request when none is set.
const DefaultTimeout = 2 * time.Minute

// ClientOptions tune the eval client.
type ClientOptions struct {
	// Timeout is the wall-clock deadline of each request; past it the request
	// is cancelled and its connection closed. 0 means DefaultTimeout.
	Timeout time.Duration
	// Stream asks for server-sent events and assembles the answer, tool-call
	// deltas included, as agents do. False sends one plain request.
	Stream bool
	// HTTP replaces the HTTP client (tests); nil uses one without proxies.
	HTTP *http.Client
	// Conn is the credentials and TLS every request carries (with HTTP nil).
	Conn transport.Conn
	// Clock, when set, times the deadline (Timeout is then wall time at the
	// clock's scale, as Clock.Real gives it) and Elapsed: a virtual clock
	// runs them in modelled time.
	Clock *timescale.Clock
}

// Client sends eval requests to an OpenAI-compatible chat completions
// endpoint. It is safe for concurrent use.
type Client struct {
	url   string
	model string
	opts  ClientOptions
	http  *http.Client
}

// NewClient returns a client for base (e.g. http://127.0.0.1:8000) and model.
func NewClient(base, model string, o ClientOptions) *Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	hc := o.HTTP
	if hc == nil {
		hc = &http.Client{Transport: o.Conn.Wrap(transport.Base())}
	}
	return &Client{url: strings.TrimRight(base, "/") + "/v1/chat/completions", model: model, opts: o, http: hc}
}

func (c *Client) now() time.Time {
	if c.opts.Clock != nil {
		return c.opts.Clock.Time()
	}
	return time.Now()
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// RequestError is a request that got no usable answer, with its class
// (ClassRefused, ClassServer, ClassTimeout, ...).
type RequestError struct {
	Class  string
	Status int
	Err    error
}

func (e *RequestError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (HTTP %d): %v", e.Class, e.Status, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Class, e.Err)
}

func (e *RequestError) Unwrap() error { return e.Err }

// wireRequest is the body sent to the server.
type wireRequest struct {
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	Tools         []Tool    `json:"tools,omitempty"`
	ToolChoice    string    `json:"tool_choice,omitempty"`
	MaxTokens     int       `json:"max_tokens"`
	Stream        bool      `json:"stream,omitempty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
}

// Complete sends r and returns the answer. The request carries r.MaxTokens
// (it is refused here, unsent, when that is not positive) and the client's
// deadline; when the deadline passes or ctx is cancelled the connection is
// closed, so the server sees the client leave.
func (c *Client) Complete(ctx context.Context, r Request) (Answer, error) {
	return c.complete(ctx, r, nil)
}

// complete is Complete, with r's body written ahead (Ahead) when a is not
// nil.
func (c *Client) complete(ctx context.Context, r Request, a *Ahead) (Answer, error) {
	start := c.now()
	if r.MaxTokens <= 0 {
		return Answer{}, &RequestError{Class: ClassBadRequest, Err: fmt.Errorf("max_tokens is %d: every eval request must carry a positive max_tokens", r.MaxTokens)}
	}
	if len(r.Messages) == 0 {
		return Answer{}, &RequestError{Class: ClassBadRequest, Err: errors.New("the request has no messages")}
	}
	var body []byte
	var err error
	if a != nil {
		body, err = a.take()
		if a.with != nil {
			ctx = a.with(ctx)
		}
	} else {
		body, err = c.marshal(r)
	}
	if err != nil {
		return Answer{}, &RequestError{Class: ClassBadRequest, Err: err}
	}
	var rctx context.Context
	var cancel context.CancelFunc
	if k := c.opts.Clock; k != nil {
		rctx, cancel = k.WithTimeout(ctx, k.Modelled(c.opts.Timeout))
	} else {
		rctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
	}
	defer cancel()
	ans, err := c.send(rctx, body)
	ans.Elapsed = c.now().Sub(start)
	if err != nil {
		var re *RequestError
		if !errors.As(err, &re) {
			re = &RequestError{Class: ClassServer, Status: ans.Status, Err: err}
		}
		switch {
		case ctx.Err() != nil:
			re.Class = ClassAborted
		case rctx.Err() != nil:
			re.Class = ClassTimeout
			re.Err = fmt.Errorf("no complete answer within %v: %w", c.opts.Timeout, re.Err)
		}
		return ans, re
	}
	return ans, nil
}

// marshal writes r's request body.
func (c *Client) marshal(r Request) ([]byte, error) {
	w := wireRequest{Model: c.model, Messages: r.Messages, Tools: r.Tools, ToolChoice: r.ToolChoice, MaxTokens: r.MaxTokens, Stream: c.opts.Stream}
	if c.opts.Stream {
		w.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{true}
	}
	return json.Marshal(w)
}

func (c *Client) send(ctx context.Context, body []byte) (Answer, error) {
	var a Answer
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return a, &RequestError{Class: ClassBadRequest, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if c.opts.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return a, &RequestError{Class: ClassConnect, Err: err}
		}
		return a, err
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		detail, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		class := ClassServer
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			class = ClassRefused
		}
		return a, &RequestError{Class: class, Status: resp.StatusCode, Err: fmt.Errorf("%s", bytes.TrimSpace(detail))}
	}
	if c.opts.Stream {
		return a, readStream(resp.Body, &a)
	}
	return a, readPlain(resp.Body, &a)
}

// wireCall is a tool call as it comes off the wire: arguments raw, so an
// object sent where a string belongs is seen rather than failing the decode.
type wireCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type wireError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

type plainResponse struct {
	Choices []struct {
		Message struct {
			Content   *string    `json:"content"`
			ToolCalls []wireCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
	Error *wireError `json:"error"`
}

func readPlain(body io.Reader, a *Answer) error {
	var pr plainResponse
	if err := json.NewDecoder(io.LimitReader(body, 64<<20)).Decode(&pr); err != nil {
		return &RequestError{Class: ClassBadResponse, Status: a.Status, Err: fmt.Errorf("the body is not a chat completion: %w", err)}
	}
	if pr.Error != nil {
		return &RequestError{Class: ClassServer, Status: a.Status, Err: fmt.Errorf("the server answered with an error: %s", pr.Error.Message)}
	}
	if len(pr.Choices) == 0 {
		return &RequestError{Class: ClassBadResponse, Status: a.Status, Err: errors.New("the completion has no choices")}
	}
	ch := pr.Choices[0]
	if ch.Message.Content != nil {
		a.Content = *ch.Message.Content
	}
	a.FinishReason = ch.FinishReason
	for _, wc := range ch.Message.ToolCalls {
		tc := ToolCall{ID: wc.ID, Type: wc.Type, Function: FunctionCall{Name: wc.Function.Name}}
		tc.Function.Arguments, tc.Malformed = argumentsText(wc.Function.Arguments)
		a.ToolCalls = append(a.ToolCalls, tc)
	}
	if pr.Usage != nil {
		a.PromptTokens, a.OutputTokens = pr.Usage.PromptTokens, pr.Usage.CompletionTokens
	}
	return nil
}

// argumentsText returns the arguments string of a tool call, and what was
// wrong when they were not sent as a JSON string.
func argumentsText(raw json.RawMessage) (string, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", ""
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s, ""
		}
	}
	return string(raw), "arguments were sent as raw JSON, not as a string holding JSON"
}

type streamChunk struct {
	Choices []struct {
		Delta struct {
			Content   *string    `json:"content"`
			ToolCalls []wireCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
	Error *wireError `json:"error"`
}

// readStream reads server-sent events until [DONE], joining content deltas
// and tool-call deltas (by index: id, type and name as first sent, argument
// fragments concatenated).
func readStream(body io.Reader, a *Answer) error {
	br := bufio.NewReaderSize(body, 64*1024)
	var content strings.Builder
	type building struct {
		call ToolCall
		args strings.Builder
		bad  string
	}
	var calls []*building
	byIndex := map[int]*building{}
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if data, ok := strings.CutPrefix(line, "data:"); ok {
			data = strings.TrimSpace(data)
			if data == "[DONE]" {
				a.Content = content.String()
				for _, b := range calls {
					b.call.Function.Arguments, b.call.Malformed = b.args.String(), b.bad
					a.ToolCalls = append(a.ToolCalls, b.call)
				}
				return nil
			}
			var ch streamChunk
			if jerr := json.Unmarshal([]byte(data), &ch); jerr != nil {
				return &RequestError{Class: ClassBadResponse, Status: a.Status, Err: fmt.Errorf("a stream chunk is not JSON: %w", jerr)}
			}
			if ch.Error != nil {
				return &RequestError{Class: ClassServer, Status: a.Status, Err: fmt.Errorf("the stream carried an error: %s", ch.Error.Message)}
			}
			if ch.Usage != nil {
				a.PromptTokens, a.OutputTokens = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
			}
			for _, c := range ch.Choices {
				if c.Delta.Content != nil {
					content.WriteString(*c.Delta.Content)
				}
				if c.FinishReason != nil && *c.FinishReason != "" {
					a.FinishReason = *c.FinishReason
				}
				for _, wc := range c.Delta.ToolCalls {
					b := byIndex[wc.Index]
					if b == nil {
						b = &building{}
						byIndex[wc.Index] = b
						calls = append(calls, b)
					}
					if b.call.ID == "" {
						b.call.ID = wc.ID
					}
					if b.call.Type == "" {
						b.call.Type = wc.Type
					}
					// The name comes whole in the first delta; some servers
					// repeat it in later ones, which must not double it.
					if n := wc.Function.Name; n != "" && n != b.call.Function.Name {
						b.call.Function.Name += n
					}
					frag, bad := argumentsText(wc.Function.Arguments)
					b.args.WriteString(frag)
					if bad != "" {
						b.bad = bad
					}
				}
			}
		}
		if err != nil {
			if err == io.EOF {
				return &RequestError{Class: ClassBadResponse, Status: a.Status, Err: errors.New("the stream ended before data: [DONE]")}
			}
			return err
		}
	}
}
