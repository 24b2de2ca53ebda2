package load

import "bytes"

// The fast path classifies a token chunk without decoding it, in one pass
// over its bytes, and allocates nothing. It reads compact JSON only (no
// whitespace between tokens: what Go's encoding/json, pydantic's
// model_dump_json, msgspec, serde_json and nlohmann's dump write, so our
// simulator, vLLM, SGLang, TGI, llama.cpp, Ollama and OpenAI), and it
// validates what it reads, so a chunk it is sure of is valid JSON.
//
// "Not sure" means the full decode (classifyFull) decides instead. The fast
// path is not sure of a chunk when:
//   - it is not compact: any whitespace between tokens (json.dumps' ", " and
//     ": ", pretty-printing), or it is not a single JSON object;
//   - it carries a usage object ("usage" with anything but null: decoding its
//     counts is the slow path's job, once per request) or an error ("error"
//     with anything but null, or "object":"error");
//   - a field that matters (object, choices, usage, error; a choice's delta
//     and text; a delta's content, refusal, tool_calls, function_call,
//     reasoning, reasoning_content) appears twice, or under a key that is
//     escaped, not ASCII, or equal to it but for case (encoding/json matches
//     keys case-insensitively and lets the last duplicate win; the full decode
//     applies those rules, the fast path does not try to);
//   - such a field has a type the full decode would have to judge (choices
//     that is not an array of objects, a delta that is not an object, text
//     that is not a string);
//   - anything else is out of place: bad escapes, control characters in a
//     string, bad numbers, nesting deeper than fastDepth, trailing bytes.
//
// So when it is sure, its answer is the full decode's answer; the fuzz test
// checks exactly that.

// fastDepth is the deepest nesting the fast path follows; deeper chunks go
// to the full decode.
const fastDepth = 32

// plainStr[b] is true for the bytes a JSON string may hold as they are: not
// a control character, quote or backslash.
var plainStr = func() (t [256]bool) {
	for b := 0x20; b < 256; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// plainKey[b] is true for the bytes the fast path reads in a key as they
// are: printable ASCII but quote and backslash.
var plainKey = func() (t [256]bool) {
	for b := 0x20; b < 0x7f; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// Field names the fast path must not mistake: those of wireChunk,
// wireChoice and wireDelta.
var (
	chunkFields = [...]string{"object", "choices", "usage", "error"}
	choiceField = [...]string{"delta", "text"}
	deltaFields = [...]string{"content", "refusal", "tool_calls", "function_call", "reasoning", "reasoning_content"}
)

// classifyFast classifies a compact chunk; sure is false when the full
// decode must decide (see above). A chunk it is sure of never has usage or
// an error.
func classifyFast(p []byte) (c chunk, sure bool) {
	n := len(p)
	if n < 2 || p[0] != '{' || p[n-1] != '}' {
		return c, false
	}
	if n == 2 {
		return c, true
	}
	i, seen := 1, uint8(0)
	for {
		key, j, ok := scanKey(p, i)
		if !ok {
			return c, false
		}
		var bit uint8
		switch string(key) {
		case "choices":
			bit = 1
			j, ok = fastChoices(p, j, &c)
		case "usage":
			bit = 2
			j, ok = fastNull(p, j)
		case "error":
			bit = 4
			j, ok = fastNull(p, j)
		case "object":
			bit = 8
			j, ok = fastObjectName(p, j)
		default:
			if foldsInto(key, chunkFields[:]) {
				return c, false
			}
			j, ok = skipValue(p, j, 1)
		}
		if !ok || seen&bit != 0 || j >= n {
			return c, false
		}
		seen |= bit
		switch p[j] {
		case ',':
			i = j + 1
		case '}':
			return c, j+1 == n
		default:
			return c, false
		}
	}
}

// fastChoices reads the choices array at p[i]: null or an array of objects.
func fastChoices(p []byte, i int, c *chunk) (int, bool) {
	if i >= len(p) {
		return i, false
	}
	if p[i] == 'n' {
		return fastNull(p, i)
	}
	if p[i] != '[' {
		return i, false
	}
	i++
	if i < len(p) && p[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = fastChoice(p, i, c); !ok || i >= len(p) {
			return i, false
		}
		switch p[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// fastChoice reads one choice object at p[i].
func fastChoice(p []byte, i int, c *chunk) (int, bool) {
	if i >= len(p) || p[i] != '{' {
		return i, false
	}
	i++
	if i < len(p) && p[i] == '}' {
		return i + 1, true
	}
	seen := uint8(0)
	for {
		key, j, ok := scanKey(p, i)
		if !ok {
			return j, false
		}
		var bit uint8
		switch string(key) {
		case "delta":
			bit = 1
			j, ok = fastDelta(p, j, c)
		case "text":
			bit = 2
			var token bool
			if j < len(p) && p[j] == '"' {
				j, token, ok = fastTokenValue(p, j)
				c.answer = c.answer || token
			} else {
				j, ok = fastNull(p, j)
			}
		default:
			if foldsInto(key, choiceField[:]) {
				return j, false
			}
			j, ok = skipValue(p, j, 3)
		}
		if !ok || seen&bit != 0 || j >= len(p) {
			return j, false
		}
		seen |= bit
		switch p[j] {
		case ',':
			i = j + 1
		case '}':
			return j + 1, true
		default:
			return j, false
		}
	}
}

// fastDelta reads a delta at p[i]: null or an object.
func fastDelta(p []byte, i int, c *chunk) (int, bool) {
	if i >= len(p) {
		return i, false
	}
	if p[i] == 'n' {
		return fastNull(p, i)
	}
	if p[i] != '{' {
		return i, false
	}
	i++
	if i < len(p) && p[i] == '}' {
		return i + 1, true
	}
	seen := uint8(0)
	for {
		key, j, ok := scanKey(p, i)
		if !ok {
			return j, false
		}
		var bit uint8
		var token, reasoning bool
		switch string(key) {
		case "content":
			bit = 1
		case "refusal":
			bit = 2
		case "tool_calls":
			bit = 4
		case "function_call":
			bit = 8
		case "reasoning":
			bit, reasoning = 16, true
		case "reasoning_content":
			bit, reasoning = 32, true
		default:
			if foldsInto(key, deltaFields[:]) {
				return j, false
			}
		}
		if bit == 0 {
			j, ok = skipValue(p, j, 5)
		} else {
			j, token, ok = fastTokenValue(p, j)
		}
		if !ok || seen&bit != 0 || j >= len(p) {
			return j, false
		}
		seen |= bit
		if token {
			if reasoning {
				c.reasoning = true
			} else {
				c.answer = true
			}
		}
		switch p[j] {
		case ',':
			i = j + 1
		case '}':
			return j + 1, true
		default:
			return j, false
		}
	}
}

// fastTokenValue reads a token-bearing value at p[i] and reports whether
// it carries output by the rule of nonEmpty: a string, array or object
// with something in it; null carries none; anything else is not sure.
func fastTokenValue(p []byte, i int) (end int, token, ok bool) {
	if i >= len(p) {
		return i, false, false
	}
	switch p[i] {
	case '"':
		end, _, ok = scanString(p, i)
		return end, end-i > 2, ok
	case '[', '{':
		end, ok = skipValue(p, i, 6)
		return end, end-i > 2, ok
	case 'n':
		end, ok = fastNull(p, i)
		return end, false, ok
	}
	return i, false, false
}

// fastNull reads the literal null at p[i].
func fastNull(p []byte, i int) (int, bool) {
	if i+4 <= len(p) && p[i] == 'n' && p[i+1] == 'u' && p[i+2] == 'l' && p[i+3] == 'l' {
		return i + 4, true
	}
	return i, false
}

// fastObjectName reads the chunk's "object" value: a string that is not
// "error" and has no escape (an escaped one could spell "error").
func fastObjectName(p []byte, i int) (int, bool) {
	if i >= len(p) || p[i] != '"' {
		return i, false
	}
	end, escaped, ok := scanString(p, i)
	if !ok || escaped || string(p[i+1:end-1]) == "error" {
		return i, false
	}
	return end, true
}

// foldsInto reports whether key equals one of names but for ASCII case
// (the exact names are matched before this is called).
func foldsInto(key []byte, names []string) bool {
	for _, name := range names {
		if len(key) == len(name) && bytes.EqualFold(key, []byte(name)) {
			return true
		}
	}
	return false
}

// scanKey reads an object key at p[i] and the colon after it, returning the
// key's bytes and the index of its value. A key with an escape or a byte
// outside printable ASCII is not sure: encoding/json would unescape or fold
// it onto a field name.
func scanKey(p []byte, i int) (key []byte, next int, ok bool) {
	if i >= len(p) || p[i] != '"' {
		return nil, i, false
	}
	q := p[i+1:]
	for j, b := range q {
		if !plainKey[b] {
			if b != '"' || j+1 >= len(q) || q[j+1] != ':' {
				return nil, i, false
			}
			return q[:j], i + j + 3, true
		}
	}
	return nil, i, false
}

// scanString reads the string at p[i] (its opening quote) and returns the
// index after its closing quote and whether it held an escape.
func scanString(p []byte, i int) (end int, escaped, ok bool) {
	i++
	for {
		q := p[i:]
		j := 0
		for j < len(q) && plainStr[q[j]] {
			j++
		}
		i += j
		if j == len(q) {
			return i, escaped, false
		}
		switch q[j] {
		case '"':
			return i + 1, escaped, true
		case '\\':
			escaped = true
			if i+1 >= len(p) {
				return i, escaped, false
			}
			switch p[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(p) || !isHex(p[i+2]) || !isHex(p[i+3]) || !isHex(p[i+4]) || !isHex(p[i+5]) {
					return i, escaped, false
				}
				i += 6
			default:
				return i, escaped, false
			}
		default: // a control character
			return i, escaped, false
		}
	}
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// skipValue reads any compact JSON value at p[i] and returns the index
// after it.
func skipValue(p []byte, i, depth int) (int, bool) {
	if i >= len(p) {
		return i, false
	}
	switch b := p[i]; {
	case b == '"':
		end, _, ok := scanString(p, i)
		return end, ok
	case b == '{' || b == '[':
		if depth >= fastDepth {
			return i, false
		}
		closer := byte('}')
		if b == '[' {
			closer = ']'
		}
		i++
		if i < len(p) && p[i] == closer {
			return i + 1, true
		}
		for {
			var ok bool
			if b == '{' {
				if i >= len(p) || p[i] != '"' {
					return i, false
				}
				if i, _, ok = scanString(p, i); !ok || i >= len(p) || p[i] != ':' {
					return i, false
				}
				i++
			}
			if i, ok = skipValue(p, i, depth+1); !ok || i >= len(p) {
				return i, false
			}
			switch p[i] {
			case ',':
				i++
			case closer:
				return i + 1, true
			default:
				return i, false
			}
		}
	case b == 'n':
		return fastNull(p, i)
	case b == 't':
		if i+4 <= len(p) && string(p[i:i+4]) == "true" {
			return i + 4, true
		}
		return i, false
	case b == 'f':
		if i+5 <= len(p) && string(p[i:i+5]) == "false" {
			return i + 5, true
		}
		return i, false
	case b == '-' || isDigit(b):
		return scanNumber(p, i)
	}
	return i, false
}

// scanNumber reads a JSON number at p[i].
func scanNumber(p []byte, i int) (int, bool) {
	n := len(p)
	if p[i] == '-' {
		i++
	}
	switch {
	case i < n && p[i] == '0':
		i++
	case i < n && p[i] >= '1' && p[i] <= '9':
		for i < n && isDigit(p[i]) {
			i++
		}
	default:
		return i, false
	}
	if i < n && p[i] == '.' {
		i++
		if i >= n || !isDigit(p[i]) {
			return i, false
		}
		for i < n && isDigit(p[i]) {
			i++
		}
	}
	if i < n && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < n && (p[i] == '+' || p[i] == '-') {
			i++
		}
		if i >= n || !isDigit(p[i]) {
			return i, false
		}
		for i < n && isDigit(p[i]) {
			i++
		}
	}
	return i, true
}
