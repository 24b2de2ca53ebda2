package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
)

// tokenizer asks the upstream's POST /tokenize for a prompt's token ids, as
// vLLM serves it for chat messages: {"model","messages","tools",
// "add_generation_prompt":true} in, {"count","tokens":[ids]} out. In auto
// mode the first answer decides, for the whole recording, whether blocks
// are of tokens or of text.
type tokenizer struct {
	url  string
	http *http.Client
	want string

	mu      sync.Mutex
	decided bool
	useTok  bool
}

func newTokenizer(upstream *url.URL, rt http.RoundTripper, want string) *tokenizer {
	t := &tokenizer{url: upstream.JoinPath("tokenize").String(), http: &http.Client{Transport: rt}, want: want}
	switch want {
	case TokenizeOff:
		t.decided = true
	case TokenizeOn:
		t.decided, t.useTok = true, true
	}
	return t
}

// wanted says whether a request should be tokenized: always in "on",
// until the decision (and after it, if it chose tokens) in "auto".
func (t *tokenizer) wanted() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.decided || t.useTok
}

// tokens says whether blocks are of token ids.
func (t *tokenizer) tokens() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.decided && t.useTok
}

// decide settles auto mode on the first answer: token blocks when it gave
// ids, text blocks otherwise. It reports whether this call decided, and how.
func (t *tokenizer) decide(err error) (bool, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.decided {
		return false, ""
	}
	t.decided, t.useTok = true, err == nil
	if err == nil {
		return true, fmt.Sprintf("%d-token blocks of the ids %s gives", BlockSize, t.url)
	}
	return true, fmt.Sprintf("%d-word text blocks: %v", BlockSize, err)
}

func (t *tokenizer) modeName() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !t.decided:
		return "undecided"
	case t.useTok:
		return "tokens"
	}
	return "text"
}

var errNoIDs = errors.New("the answer holds no token ids")

// ids asks for the token ids of a chat prompt, with the agent's own
// credentials (held in memory for this call only).
func (t *tokenizer) ids(ctx context.Context, model string, msgs []json.RawMessage, tools json.RawMessage, auth http.Header) ([]int64, error) {
	var b bytes.Buffer
	b.WriteString(`{"model":`)
	m, _ := json.Marshal(model)
	b.Write(m)
	b.WriteString(`,"messages":[`)
	for i, raw := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(raw)
	}
	b.WriteByte(']')
	if !isNull(tools) {
		b.WriteString(`,"tools":`)
		b.Write(tools)
	}
	b.WriteString(`,"add_generation_prompt":true}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, &b)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range auth {
		req.Header[k] = v
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %v", t.url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("POST %s: reading the answer: %v", t.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST %s: HTTP %d", t.url, resp.StatusCode)
	}
	var out struct {
		Tokens []json.Number `json:"tokens"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("POST %s: the answer is not {\"tokens\":[ids]}: %v", t.url, err)
	}
	if len(out.Tokens) == 0 {
		return nil, fmt.Errorf("POST %s: %w", t.url, errNoIDs)
	}
	ids := make([]int64, len(out.Tokens))
	for i, n := range out.Tokens {
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("POST %s: tokens[%d] is %s, not a token id", t.url, i, n)
		}
		ids[i] = v
	}
	return ids, nil
}
