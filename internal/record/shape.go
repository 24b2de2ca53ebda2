package record

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"time"
)

// shape is what the recorder keeps of one chat completion: lengths, times
// and salted hashes. No text survives into it.
type shape struct {
	arrival, first, end time.Time
	model               string
	// chain[i] hashes the model, the tools and messages[0..i]: two requests
	// whose chains share k entries share their first k messages.
	chain []uint64
	// firstTurn is the index of the first message that is not a system or
	// developer message (len(messages) when there is none).
	firstTurn int
	// blocks are the salted rolling hashes of the prompt's full blocks.
	blocks      []uint64
	tokenBlocks bool // blocks are of token ids (else of text words)
	stream      bool // the answer was asked for as a stream
	words       int  // words of the prompt's text
	systemWords int  // of them, in leading system or developer messages
	toolWords   int  // of them, in the tools offered
	in, out     int
	inExact     bool // in came from usage or token ids, not from words
	stop        string
	toolCalls   int
	inputType   string
	outputTypes []string
}

var errTooLarge = errors.New("the request is over the capture limit")

// chatBody is the part of a chat request the recorder reads.
type chatBody struct {
	Model     string            `json:"model"`
	Stream    bool              `json:"stream"`
	Messages  []json.RawMessage `json:"messages"`
	Tools     json.RawMessage   `json:"tools"`
	Functions json.RawMessage   `json:"functions"`
}

// message is one chat message; only its role, name and ids are strings the
// recorder compares as they are, the rest is hashed.
type message struct {
	Role         string          `json:"role"`
	Name         string          `json:"name"`
	ToolCallID   string          `json:"tool_call_id"`
	Content      json.RawMessage `json:"content"`
	ToolCalls    []toolCall      `json:"tool_calls"`
	FunctionCall *function       `json:"function_call"`
}

type toolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function function `json:"function"`
}

type function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// shapeOf reads an exchange's request and answer and keeps their shape.
func (r *Recorder) shapeOf(x *exchange) (*shape, error) {
	select {
	case <-x.reqDone:
	case <-time.After(30 * time.Second):
		return nil, errors.New("the request body was never closed")
	}
	if x.reqTooLarge {
		return nil, errTooLarge
	}
	var body chatBody
	if err := json.Unmarshal(x.req, &body); err != nil {
		return nil, fmt.Errorf("request body: %v", err)
	}
	if len(body.Messages) == 0 {
		return nil, errors.New("request body: no messages")
	}
	s := &shape{arrival: x.arrival, first: x.first, end: x.end, model: body.Model, stream: body.Stream}
	tools := body.Tools
	if isNull(tools) {
		tools = body.Functions
	}
	text := newBlockHasher(r.seed, BlockSize)
	var canon []byte
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(body.Model)
	h.WriteByte(0)
	if !isNull(tools) {
		canon = canonicalJSON(canon[:0], tools)
		h.Write(canon)
		text.marker("tools")
		text.text(canon)
		s.toolWords = text.words
	}
	prev := h.Sum64()
	s.firstTurn = len(body.Messages)
	lastRole := ""
	for i, raw := range body.Messages {
		var m message
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("request body: messages[%d]: %v", i, err)
		}
		lastRole = m.Role
		system := m.Role == "system" || m.Role == "developer"
		if !system && s.firstTurn == len(body.Messages) {
			s.firstTurn = i
		}
		before := text.words
		canon = m.canonical(canon[:0], text)
		if system && s.firstTurn == len(body.Messages) {
			s.systemWords += text.words - before
		}
		h.Reset()
		var p [8]byte
		binary.LittleEndian.PutUint64(p[:], prev)
		h.Write(p[:])
		h.Write(canon)
		prev = h.Sum64()
		s.chain = append(s.chain, prev)
	}
	text.end()
	s.words = text.words
	s.inputType = "text"
	if lastRole == "tool" || lastRole == "function" {
		s.inputType = "tool_result"
	}

	ids, tokenErr := r.tokenIDs(x, &body, tools)
	switch {
	case ids != nil:
		s.tokenBlocks = true
		s.blocks = tokenBlocks(r.seed, ids, BlockSize)
	case tokenErr != nil:
		r.stats.noTokens.Add(1)
		r.once(&r.stats.loggedNoTok, "record: a request was recorded without hash ids: %v (further ones are only counted)", tokenErr)
	default:
		s.blocks = text.blocks
	}

	a := parseAnswer(x.resp, x.contentType, x.encoding)
	switch {
	case a.usage:
		s.in, s.inExact = a.promptTokens, true
	case ids != nil:
		s.in, s.inExact = len(ids), true
	default:
		s.in = s.words
		r.stats.estimatedIn.Add(1)
	}
	if a.usage {
		s.out = a.completionTokens
	} else {
		s.out = a.estimate()
		r.stats.estimatedOut.Add(1)
	}
	s.stop, s.toolCalls = a.stopReason(), a.toolCalls
	if a.text {
		s.outputTypes = append(s.outputTypes, "text")
	}
	if a.toolCalls > 0 {
		s.outputTypes = append(s.outputTypes, "tool_use")
	}
	return s, nil
}

// tokenIDs returns the prompt's token ids from the upstream's /tokenize when
// token blocks are in use; nil ids with a nil error means text blocks.
func (r *Recorder) tokenIDs(x *exchange, body *chatBody, tools json.RawMessage) ([]int64, error) {
	if !r.tok.wanted() {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids, err := r.tok.ids(ctx, body.Model, body.Messages, tools, x.auth)
	if chosen, how := r.tok.decide(err); chosen {
		r.o.Log("record: prompt blocks are %s", how)
	}
	if !r.tok.tokens() {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ids, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null" || string(raw) == "[]"
}

// canonical appends the message's identity (what a cache would see of it,
// however its JSON was spaced or ordered) to dst, and feeds its text to the
// block hasher: a marker word for the role, then the content's words, each
// tool call's name and arguments.
func (m *message) canonical(dst []byte, text *blockHasher) []byte {
	dst = append(dst, m.Role...)
	dst = append(dst, 0)
	dst = append(dst, m.Name...)
	dst = append(dst, 0)
	dst = append(dst, m.ToolCallID...)
	dst = append(dst, 0)
	text.marker(m.Role + "\x00" + m.Name + "\x00" + m.ToolCallID)
	dst = appendContent(dst, m.Content, text)
	calls := m.ToolCalls
	if m.FunctionCall != nil {
		calls = append(slices.Clip(calls), toolCall{Type: "function", Function: *m.FunctionCall})
	}
	for _, c := range calls {
		dst = append(dst, 1)
		dst = append(dst, c.ID...)
		dst = append(dst, 0)
		dst = append(dst, c.Function.Name...)
		dst = append(dst, 0)
		dst = append(dst, c.Function.Arguments...)
		dst = append(dst, 0)
		text.marker("call\x00" + c.ID + "\x00" + c.Function.Name)
		text.text([]byte(c.Function.Arguments))
	}
	return dst
}

// appendContent appends a message content (a string, or a list of parts)
// and feeds its text: text parts as words, any other part (an image) as
// one marker word holding its JSON.
func appendContent(dst []byte, raw json.RawMessage, text *blockHasher) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return append(dst, 2)
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			dst = append(dst, 3)
			dst = append(dst, s...)
			text.text([]byte(s))
			return append(dst, 0)
		}
	}
	var parts []json.RawMessage
	if raw[0] == '[' && json.Unmarshal(raw, &parts) == nil {
		for _, p := range parts {
			var tp struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			}
			_ = json.Unmarshal(p, &tp)
			if tp.Text != nil && (tp.Type == "text" || tp.Type == "input_text" || tp.Type == "") {
				dst = append(dst, 4)
				dst = append(dst, *tp.Text...)
				dst = append(dst, 0)
				text.text([]byte(*tp.Text))
				continue
			}
			c := canonicalJSON(nil, p)
			dst = append(dst, 5)
			dst = append(dst, c...)
			dst = append(dst, 0)
			text.marker(string(c))
		}
		return dst
	}
	c := canonicalJSON(nil, raw)
	text.marker(string(c))
	return append(append(dst, 6), c...)
}

// canonicalJSON appends raw re-encoded with sorted keys and no spaces, so
// equal values give equal bytes; raw that does not decode is kept as it is.
func canonicalJSON(dst []byte, raw json.RawMessage) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return append(dst, raw...)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return append(dst, raw...)
	}
	return append(dst, b...)
}

// blockHasher cuts text into words (split on ASCII white space) and blocks of
// size words, and chains a salted hash over them: block j's hash covers the
// hash of block j-1 and its own words, so equal prefixes give equal hashes
// and nothing else does. Marker words stand for message boundaries (role,
// tool call) so that "a b" + "c" and "a" + "b c" differ.
type blockHasher struct {
	h      maphash.Hash
	size   int
	inBlk  int // words in the current block
	inWord bool
	words  int
	blocks []uint64
}

func newBlockHasher(seed maphash.Seed, size int) *blockHasher {
	b := &blockHasher{size: size}
	b.h.SetSeed(seed)
	return b
}

// asciiSpace marks the bytes that separate words.
var asciiSpace = [256]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

func (b *blockHasher) text(s []byte) {
	for len(s) > 0 {
		if asciiSpace[s[0]] {
			b.endWord()
			s = s[1:]
			continue
		}
		i := 0
		for i < len(s) && !asciiSpace[s[i]] {
			i++
		}
		b.inWord = true
		b.h.Write(s[:i])
		s = s[i:]
	}
}

// marker adds one word that no text can spell (it starts with a 0 byte).
func (b *blockHasher) marker(m string) {
	b.endWord()
	b.h.WriteByte(0)
	b.h.WriteString(m)
	b.inWord = true
	b.endWord()
}

func (b *blockHasher) endWord() {
	if !b.inWord {
		return
	}
	b.inWord = false
	b.h.WriteByte(' ')
	b.words++
	b.inBlk++
	if b.inBlk == b.size {
		v := b.h.Sum64()
		b.blocks = append(b.blocks, v)
		b.h.Reset()
		var p [8]byte
		binary.LittleEndian.PutUint64(p[:], v)
		b.h.Write(p[:])
		b.inBlk = 0
	}
}

// end closes the last word; a part block at the end is not a block (an
// engine caches full blocks only).
func (b *blockHasher) end() { b.endWord() }

// tokenBlocks chains a salted hash over full blocks of size token ids.
func tokenBlocks(seed maphash.Seed, ids []int64, size int) []uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	out := make([]uint64, 0, len(ids)/size)
	var p [8]byte
	for i := 0; i+size <= len(ids); i += size {
		for _, id := range ids[i : i+size] {
			binary.LittleEndian.PutUint64(p[:], uint64(id))
			h.Write(p[:])
		}
		v := h.Sum64()
		out = append(out, v)
		h.Reset()
		binary.LittleEndian.PutUint64(p[:], v)
		h.Write(p[:])
	}
	return out
}
