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
	"strconv"
	"time"
	"unicode/utf8"
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

// chatBody is the part of a chat request the recorder reads. Message
// contents, tool arguments and tools stay raw JSON: encoding/json checks and
// copies them once, and the recorder walks their strings itself.
type chatBody struct {
	Model     string    `json:"model"`
	Stream    bool      `json:"stream"`
	Messages  []message `json:"messages"`
	Tools     rawJSON   `json:"tools"`
	Functions rawJSON   `json:"functions"`
}

// rawJSON is a JSON value left undecoded, pointing into the request body
// rather than copied out of it (as json.RawMessage would): json.Unmarshal
// hands UnmarshalJSON a part of the slice it was given, and the body is
// neither changed nor reused until the shape is taken. This keeps a
// request's decoding from allocating a second copy of its prompt.
type rawJSON []byte

func (r *rawJSON) UnmarshalJSON(data []byte) error {
	*r = data
	return nil
}

// message is one chat message: what a cache would see of it, however the
// rest of its fields (cache_control markers, say) change between requests.
type message struct {
	Role         string     `json:"role"`
	Name         string     `json:"name"`
	ToolCallID   string     `json:"tool_call_id"`
	Content      rawJSON    `json:"content"`
	ToolCalls    []toolCall `json:"tool_calls"`
	FunctionCall *function  `json:"function_call"`
}

type toolCall struct {
	ID       string   `json:"id"`
	Function function `json:"function"`
}

type function struct {
	Name      string  `json:"name"`
	Arguments rawJSON `json:"arguments"`
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
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(body.Model)
	h.WriteByte(0)
	if !isNull(tools) {
		h.Write(tools)
		text.marker("tools")
		text.text(tools)
		s.toolWords = text.words
	}
	prev := h.Sum64()
	s.firstTurn = len(body.Messages)
	lastRole := ""
	for i := range body.Messages {
		m := &body.Messages[i]
		lastRole = m.Role
		system := m.Role == "system" || m.Role == "developer"
		if !system && s.firstTurn == len(body.Messages) {
			s.firstTurn = i
		}
		before := text.words
		h.Reset()
		var p [8]byte
		binary.LittleEndian.PutUint64(p[:], prev)
		h.Write(p[:])
		if err := m.hash(&h, text); err != nil {
			return nil, fmt.Errorf("request body: messages[%d]: %v", i, err)
		}
		if system && s.firstTurn == len(body.Messages) {
			s.systemWords += text.words - before
		}
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
func (r *Recorder) tokenIDs(x *exchange, body *chatBody, tools rawJSON) ([]int64, error) {
	if !r.tok.wanted() {
		return nil, nil
	}
	// the messages as the agent sent them, every field kept
	var raw struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(x.req, &raw); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids, err := r.tok.ids(ctx, body.Model, raw.Messages, json.RawMessage(tools), x.auth)
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

func isNull(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null" || string(raw) == "[]"
}

// hash feeds the message's identity to h (its role, name, tool call id,
// content and tool calls, each delimited) and its text to the block hasher:
// a marker word for the role, then the content's words, then each tool
// call's marker and arguments.
func (m *message) hash(h *maphash.Hash, text *blockHasher) error {
	h.WriteString(m.Role)
	h.WriteByte(0)
	h.WriteString(m.Name)
	h.WriteByte(0)
	h.WriteString(m.ToolCallID)
	h.WriteByte(0)
	text.marker(m.Role + "\x00" + m.Name + "\x00" + m.ToolCallID)
	if err := content(h, m.Content, text); err != nil {
		return fmt.Errorf("content: %v", err)
	}
	calls := m.ToolCalls
	if m.FunctionCall != nil {
		calls = append(slices.Clip(calls), toolCall{Function: *m.FunctionCall})
	}
	for _, c := range calls {
		h.WriteByte(1)
		h.WriteString(c.ID)
		h.WriteByte(0)
		h.WriteString(c.Function.Name)
		h.WriteByte(0)
		h.Write(c.Function.Arguments)
		h.WriteByte(0)
		text.marker("call\x00" + c.ID + "\x00" + c.Function.Name)
		if a := bytes.TrimSpace(c.Function.Arguments); len(a) > 0 && a[0] == '"' {
			text.jsonString(a)
		} else {
			text.text(a)
		}
	}
	return nil
}

// content feeds a message content: a string, or a list of parts whose text
// parts are words and whose other parts (images) are one marker word each.
func content(h *maphash.Hash, raw rawJSON, text *blockHasher) error {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		h.WriteByte(2)
	case raw[0] == '"':
		h.WriteByte(3)
		h.Write(raw)
		text.jsonString(raw)
	case raw[0] == '[':
		var parts []struct {
			Type string  `json:"type"`
			Text rawJSON `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return err
		}
		var all []rawJSON
		for i, p := range parts {
			if len(p.Text) > 0 && p.Text[0] == '"' && (p.Type == "text" || p.Type == "input_text" || p.Type == "") {
				h.WriteByte(4)
				h.Write(p.Text)
				text.jsonString(p.Text)
				continue
			}
			if all == nil {
				if err := json.Unmarshal(raw, &all); err != nil {
					return err
				}
			}
			h.WriteByte(5)
			h.Write(all[i])
			text.marker(string(all[i]))
		}
	default:
		h.WriteByte(6)
		h.Write(raw)
		text.marker(string(raw))
	}
	h.WriteByte(0)
	return nil
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

// jsonString feeds the text of a JSON string literal (quotes included,
// already checked by encoding/json), undoing its escapes as it goes, so the
// same text gives the same words however it was escaped.
func (b *blockHasher) jsonString(raw []byte) {
	if len(raw) < 2 {
		return
	}
	s := raw[1 : len(raw)-1]
	for {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			b.text(s)
			return
		}
		b.text(s[:i])
		if i+1 >= len(s) {
			return
		}
		switch c := s[i+1]; c {
		case 'n', 't', 'r', 'f':
			b.endWord() // white space, as strings.Fields splits on it
			s = s[i+2:]
		case 'b':
			b.inWord = true
			b.h.WriteByte('\b')
			s = s[i+2:]
		case 'u':
			if i+6 > len(s) {
				return
			}
			v, err := strconv.ParseUint(string(s[i+2:i+6]), 16, 32)
			s = s[i+6:]
			if err != nil {
				continue
			}
			if r := rune(v); r < utf8.RuneSelf && asciiSpace[r] {
				b.endWord()
			} else {
				var enc [utf8.UTFMax]byte
				n := utf8.EncodeRune(enc[:], r)
				b.inWord = true
				b.h.Write(enc[:n])
			}
		default: // \" \\ \/
			b.inWord = true
			b.h.WriteByte(c)
			s = s[i+2:]
		}
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
