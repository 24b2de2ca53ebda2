package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/transport"
)

// Tokenizer counts prompt tokens with the server's POST /tokenize, as vLLM
// and SGLang serve it: {"model","prompt"} in, {"count"} (or "tokens") out.
// Pre-flight uses it through prompt.Calibrate.
type Tokenizer struct {
	url, model string
	http       *http.Client
}

// NewTokenizer returns a tokenizer for base (e.g. http://127.0.0.1:8000) and model.
func NewTokenizer(base, model string) *Tokenizer {
	return NewTokenizerConn(base, model, transport.Conn{})
}

// NewTokenizerConn is NewTokenizer for a server that wants credentials.
func NewTokenizerConn(base, model string, conn transport.Conn) *Tokenizer {
	return &Tokenizer{url: base + "/tokenize", model: model, http: conn.Client(30 * time.Second)}
}

// Count returns the tokens the served model makes of text. A server without
// the endpoint (404, 405 or 501) gives an error wrapping prompt.ErrNoTokenizer.
func (t *Tokenizer) Count(ctx context.Context, text []byte) (int, error) {
	body, err := json.Marshal(struct {
		Model  string `json:"model"`
		Prompt string `json:"prompt"`
	}{t.model, string(text)})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST %s: %v; check the endpoint is up", t.url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, fmt.Errorf("POST %s: reading the answer: %v", t.url, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return 0, fmt.Errorf("POST %s: HTTP %d: %w", t.url, resp.StatusCode, prompt.ErrNoTokenizer)
	default:
		return 0, fmt.Errorf("POST %s: HTTP %d: %s", t.url, resp.StatusCode, truncate(bytes.TrimSpace(data), 300))
	}
	var out struct {
		Count  *int              `json:"count"`
		Tokens []json.RawMessage `json:"tokens"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return 0, fmt.Errorf("POST %s: answer is not JSON: %v: %s", t.url, err, truncate(data, 200))
	}
	switch {
	case out.Count != nil:
		return *out.Count, nil
	case out.Tokens != nil:
		return len(out.Tokens), nil
	}
	return 0, fmt.Errorf("POST %s: answer has neither count nor tokens: %s", t.url, truncate(data, 200))
}

// Func adapts Count to prompt.Calibrate's tokenize argument, under ctx.
func (t *Tokenizer) Func(ctx context.Context) func([]byte) (int, error) {
	return func(text []byte) (int, error) { return t.Count(ctx, text) }
}
