package sim

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
)

// Reading a chat request costs wall time that the scaled clock multiplies:
// at scale 100 the ~12 ms encoding/json and the prompt scan took over a
// heavy turn's 1 MB body were 1.2 modelled seconds of TTFT that the client
// saw and the engine's TTFT (which starts at arrival in the engine, as
// vLLM's does) did not. The fast path below reads the shape clients send in
// one byte search and one scan per message content; any other body goes
// through encoding/json, whose answers (and errors) stay the reference.

// readBody reads a request body whole, in one allocation when its length is
// known.
func readBody(r io.Reader, size int64) ([]byte, error) {
	if size < 0 || size > maxBodyBytes {
		size = 0
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// bodyReader reads b as a request body and lets go of it once read: a
// gateway that read a body to route it hands it on with this, so the copy
// it stays a reader for while the answer streams does not keep the bytes.
func bodyReader(b []byte) io.ReadCloser { return &onceBody{b: b} }

type onceBody struct{ b []byte }

func (o *onceBody) Read(p []byte) (int, error) {
	if len(o.b) == 0 {
		o.b = nil
		return 0, io.EOF
	}
	n := copy(p, o.b)
	if o.b = o.b[n:]; len(o.b) == 0 {
		o.b = nil
	}
	return n, nil
}

func (o *onceBody) Close() error { return nil }

// chatKeys and messageKeys are the members the fast path reads; a member
// that only a case fold would match to one of them is left to encoding/json,
// which matches keys that way.
var (
	chatKeys    = []string{"model", "messages", "max_tokens", "max_completion_tokens", "stream", "tools", "tool_choice", "stream_options"} // in fastChat's order
	messageKeys = []string{"role", "content"}
)

// fastChat reads a chat request body and scans its prompt, for bodies whose
// top-level value is an object with one non-empty "messages" array of
// objects and keys spelled as chatRequest's tags. It reports false, having
// decided nothing, for anything else: then encoding/json reads the body.
// What it returns is what json.Decoder and scanMessages give (see
// TestChatBodyMatchesDecoder and FuzzChatBody); message contents are slices
// of buf.
func fastChat(buf []byte, blockSize int) (chatRequest, *promptScan, bool) {
	body, at, ok := fastRequest(buf)
	if !ok {
		return body, nil, false
	}
	scan := newPromptScan(blockSize, len(buf))
	if !scan.addMessages(body.Messages, at, 0, -1) {
		return body, nil, false
	}
	return body, scan, true
}

// addMessages scans msgs[from:] (contents at body offsets at) and finishes
// the scan. With resume >= 0 the scan stands inside msgs[from]'s content
// string at body offset resume (see promptScan.resume), so that message's
// boundary and the bytes before resume are not fed again. It reports false
// for a content the scan refuses.
func (p *promptScan) addMessages(msgs []chatMessage, at []int, from, resume int) bool {
	for i := from; i < len(msgs); i++ {
		m := msgs[i]
		p.msg = i
		if i == from && resume >= 0 {
			end := at[i] + len(m.Content) - 1 // the closing quote
			if resume > end || p.addStringBody(m.Content[resume-at[i]:len(m.Content)-1], resume) != nil {
				return false
			}
			continue
		}
		p.boundary(m.Role)
		if p.addContentAt(m.Content, at[i]) != nil {
			return false
		}
	}
	p.finish()
	return true
}

// fastRequest is fastChat's reading of the request, without the scan: the
// request and the body offset of each message's content (-1 when it has
// none).
func fastRequest(buf []byte) (chatRequest, []int, bool) {
	var body chatRequest
	var at []int
	i := skipSpace(buf, 0)
	if i >= len(buf) || buf[i] != '{' {
		return body, nil, false
	}
	var seen uint
	for i = skipSpace(buf, i+1); ; i = skipSpace(buf, i+1) {
		k, val, end, ok := member(buf, i, len(buf), chatKeys, &seen)
		if !ok {
			return body, nil, false
		}
		v := buf[val:end]
		var err error
		switch k {
		case 0:
			err = json.Unmarshal(v, &body.Model)
		case 1:
			body.Messages, at, ok = fastMessages(buf, val, end)
		case 2:
			err = json.Unmarshal(v, &body.MaxTokens)
		case 3:
			err = json.Unmarshal(v, &body.MaxCompletionTokens)
		case 4:
			err = json.Unmarshal(v, &body.Stream)
		case 5:
			err = json.Unmarshal(v, &body.Tools)
		case 6:
			err = json.Unmarshal(v, &body.ToolChoice)
		case 7:
			err = json.Unmarshal(v, &body.StreamOptions)
		default:
			ok = json.Valid(v)
		}
		if err != nil || !ok {
			return body, nil, false
		}
		if i = skipSpace(buf, end); i < len(buf) && buf[i] == '}' {
			break // what follows the object is not read, as json.Decoder does not
		}
		if i >= len(buf) || buf[i] != ',' {
			return body, nil, false
		}
	}
	if len(body.Messages) == 0 {
		return body, nil, false
	}
	return body, at, true
}

// fastMessages reads the messages array buf[i:end]: objects whose role is a
// string and whose content is any value (checked when it is scanned), and
// the offset of each content in buf (-1 for none).
func fastMessages(buf []byte, i, end int) ([]chatMessage, []int, bool) {
	if buf[i] != '[' {
		return nil, nil, false
	}
	if i = skipSpace(buf, i+1); i < end && buf[i] == ']' {
		return nil, nil, i+1 == end
	}
	var msgs []chatMessage
	var at []int
	for ; ; i = skipSpace(buf, i+1) {
		if i >= end || buf[i] != '{' {
			return nil, nil, false
		}
		var m chatMessage
		mat := -1
		if i = skipSpace(buf, i+1); i < end && buf[i] == '}' {
			i++
		} else {
			var seen uint
			for ; ; i = skipSpace(buf, i+1) {
				k, val, vend, ok := member(buf, i, end, messageKeys, &seen)
				if !ok {
					return nil, nil, false
				}
				switch k {
				case 0:
					ok = json.Unmarshal(buf[val:vend], &m.Role) == nil
				case 1:
					m.Content, mat = buf[val:vend:vend], val
				default:
					ok = json.Valid(buf[val:vend])
				}
				if !ok {
					return nil, nil, false
				}
				if i = skipSpace(buf, vend); i < end && buf[i] == '}' {
					i++
					break
				}
				if i >= end || buf[i] != ',' {
					return nil, nil, false
				}
			}
		}
		msgs, at = append(msgs, m), append(at, mat)
		if i = skipSpace(buf, i); i < end && buf[i] == ']' {
			return msgs, at, i+1 == end
		}
		if i >= end || buf[i] != ',' {
			return nil, nil, false
		}
	}
}

// member reads `"key": value` at buf[i] (within buf[:end]), returning the
// key's index in known (-1 for another key) and the value's span. A key that
// is escaped or holds a control character, a known key seen before, or a case fold of a known key but not
// equal to it is refused. The value's nesting is checked; its grammar is the
// caller's to check.
func member(buf []byte, i, end int, known []string, seen *uint) (k, val, vend int, ok bool) {
	if i >= end || buf[i] != '"' {
		return 0, 0, 0, false
	}
	kend, ok := stringEnd(buf, i)
	if !ok || kend > end {
		return 0, 0, 0, false
	}
	raw := buf[i+1 : kend-1]
	for _, c := range raw {
		if c == '\\' || c < 0x20 {
			return 0, 0, 0, false
		}
	}
	k = -1
	for j, name := range known {
		if string(raw) == name {
			if *seen&(1<<j) != 0 {
				return 0, 0, 0, false
			}
			*seen |= 1 << j
			k = j
		} else if strings.EqualFold(string(raw), name) {
			return 0, 0, 0, false
		}
	}
	if i = skipSpace(buf, kend); i >= end || buf[i] != ':' {
		return 0, 0, 0, false
	}
	val = skipSpace(buf, i+1)
	vend, ok = valueEnd(buf, val)
	return k, val, vend, ok && vend <= end
}

// skipSpace skips JSON whitespace from i.
func skipSpace(buf []byte, i int) int {
	for i < len(buf) {
		switch buf[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at buf[i]
// (a quote), finding the closing quote by byte search.
func stringEnd(buf []byte, i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(buf[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for b := j - 1; b > i && buf[b] == '\\'; b-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j, true
		}
	}
}

// valueEnd returns the index just past the JSON value starting at buf[i],
// following strings and nesting only; the value's grammar is checked by
// whoever decodes it.
func valueEnd(buf []byte, i int) (int, bool) {
	if i >= len(buf) {
		return 0, false
	}
	switch buf[i] {
	case '"':
		return stringEnd(buf, i)
	case '{', '[':
		depth := 0
		for i < len(buf) {
			switch buf[i] {
			case '"':
				end, ok := stringEnd(buf, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	case ',', '}', ']', ':':
		return 0, false
	}
	j := i
	for j < len(buf) {
		switch buf[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j, true
		}
		j++
	}
	return j, true
}
