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

// Field names the fast path must not mistake: those of wireChunk,
// wireChoice and wireDelta.
var (
	chunkFields = [...]string{"object", "choices", "usage", "error"}
	choiceField = [...]string{"delta", "text"}
	deltaFields = [...]string{"content", "refusal", "tool_calls", "function_call", "reasoning", "reasoning_content"}
)

// fastMemo remembers the head of the last chunk of a stream: the bytes of
// its top-level fields before its first "choices" (id, object, created,
// model...), which servers repeat unchanged in every chunk; they carry no
// token, only the walk's seen bits. A chunk that starts with
// the same bytes is walked from "choices" on: reading the same bytes again
// would come to the same state. The zero value remembers nothing.
//
// It also remembers the shape of the last chunk whose one token-bearing
// value was a string (a token chunk): the bytes before that string and
// after it. A chunk with the same bytes before a valid string and the same
// after it is walked the same way but for that string: it is sure, and
// carries a token of the same kind exactly when its string is not empty.
type fastMemo struct {
	n    int   // bytes remembered; 0 for none
	seen uint8 // the fields seen in them (the walk's seen bits)
	head [fastMemoSize]byte

	before, after int  // the shape's bytes before and after its string; before 0 for none
	reasoning     bool // the string is reasoning, not answer
	shape         [fastShapeSize]byte
	tail          [fastTailSize]byte
}

// fastMemoSize is the longest chunk head fastMemo keeps; fastShapeSize
// and fastTailSize the longest bytes before and after a shape's string.
const (
	fastMemoSize  = 256
	fastShapeSize = 320
	fastTailSize  = 96
)

// tokenTrack follows a walk's token-bearing values: how many, and the span
// and kind of the last.
type tokenTrack struct {
	n          int
	start, end int
	str        bool // the last was a string
	reasoning  bool
}

func (t *tokenTrack) saw(p []byte, start, end int, reasoning bool) {
	t.n++
	t.start, t.end, t.str, t.reasoning = start, end, p[start] == '"', reasoning
}

// sameShape classifies p by memo's shape when p has it.
func (memo *fastMemo) sameShape(p []byte) (c chunk, ok bool) {
	b := memo.before
	if b == 0 || len(p) < b+2+memo.after || p[b] != '"' || string(p[:b]) != string(memo.shape[:b]) {
		return c, false
	}
	end, _, ok := scanString(p, b)
	if !ok || len(p)-end != memo.after || string(p[end:]) != string(memo.tail[:memo.after]) {
		return c, false
	}
	if end-b > 2 {
		c.answer, c.reasoning = !memo.reasoning, memo.reasoning
	}
	return c, true
}

// remember keeps p's shape when its one token-bearing value was a string.
func (memo *fastMemo) remember(p []byte, t *tokenTrack) {
	if t.n != 1 || !t.str || t.start > fastShapeSize || len(p)-t.end > fastTailSize {
		return
	}
	memo.before = copy(memo.shape[:], p[:t.start])
	memo.after = copy(memo.tail[:], p[t.end:])
	memo.reasoning = t.reasoning
}

// classifyFast classifies a compact chunk; sure is false when the full
// decode must decide (see above). A chunk it is sure of never has usage or
// an error. memo, when not nil, carries the head of the stream's chunks
// from one call to the next.
func classifyFast(p []byte, memo *fastMemo) (c chunk, sure bool) {
	n := len(p)
	if n < 2 || p[0] != '{' || p[n-1] != '}' {
		return c, false
	}
	if n == 2 {
		return c, true
	}
	if memo != nil {
		if c, ok := memo.sameShape(p); ok {
			return c, true
		}
	}
	var track tokenTrack
	i, seen, resumed := 1, uint8(0), false
	if memo != nil && memo.n > 0 && memo.n < n && string(p[:memo.n]) == string(memo.head[:memo.n]) {
		i, seen, resumed = memo.n, memo.seen, true
	}
	for {
		id, key, j, ok := readKey(p, i)
		if !ok {
			return c, false
		}
		var bit uint8
		switch id {
		case kChoices:
			bit = 1
			// Only a head without choices is remembered: resuming after one
			// would drop what its choices carried.
			if memo != nil && !resumed && seen&bit == 0 && i <= fastMemoSize {
				memo.n = copy(memo.head[:], p[:i])
				memo.seen = seen
			}
			j, ok = fastChoices(p, j, &c, &track)
		case kUsage:
			bit = 2
			j, ok = fastNull(p, j)
		case kError:
			bit = 4
			j, ok = fastNull(p, j)
		case kObject:
			bit = 8
			j, ok = fastObjectName(p, j)
		default:
			if id == kUnknown && foldsInto(key, chunkFields[:]) {
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
			if j+1 != n {
				return c, false
			}
			if memo != nil {
				memo.remember(p, &track)
			}
			return c, true
		default:
			return c, false
		}
	}
}

// fastChoices reads the choices array at p[i]: null or an array of objects.
func fastChoices(p []byte, i int, c *chunk, t *tokenTrack) (int, bool) {
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
		if i, ok = fastChoice(p, i, c, t); !ok || i >= len(p) {
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
func fastChoice(p []byte, i int, c *chunk, t *tokenTrack) (int, bool) {
	if i >= len(p) || p[i] != '{' {
		return i, false
	}
	i++
	if i < len(p) && p[i] == '}' {
		return i + 1, true
	}
	seen := uint8(0)
	for {
		id, key, j, ok := readKey(p, i)
		if !ok {
			return j, false
		}
		var bit uint8
		switch id {
		case kDelta:
			bit = 1
			j, ok = fastDelta(p, j, c, t)
		case kText:
			bit = 2
			var token bool
			if j < len(p) && p[j] == '"' {
				start := j
				j, token, ok = fastTokenValue(p, j)
				c.answer = c.answer || token
				t.saw(p, start, j, false)
			} else {
				j, ok = fastNull(p, j)
			}
		default:
			if id == kUnknown && foldsInto(key, choiceField[:]) {
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
func fastDelta(p []byte, i int, c *chunk, t *tokenTrack) (int, bool) {
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
		id, key, j, ok := readKey(p, i)
		if !ok {
			return j, false
		}
		var bit uint8
		var token, reasoning bool
		switch id {
		case kContent:
			bit = 1
		case kRefusal:
			bit = 2
		case kToolCalls:
			bit = 4
		case kFunctionCall:
			bit = 8
		case kReasoning:
			bit, reasoning = 16, true
		case kReasoningContent:
			bit, reasoning = 32, true
		default:
			if id == kUnknown && foldsInto(key, deltaFields[:]) {
				return j, false
			}
		}
		if bit == 0 {
			j, ok = skipValue(p, j, 5)
		} else {
			start := j
			j, token, ok = fastTokenValue(p, j)
			if ok {
				t.saw(p, start, j, reasoning)
			}
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

// keyID names the keys the fast path knows: the fields of wireChunk,
// wireChoice and wireDelta, and (kOther) keys every chunk has that are no
// field's name but for case, so they need no fold check.
type keyID uint8

const (
	kUnknown keyID = iota
	kOther
	kObject
	kChoices
	kUsage
	kError
	kDelta
	kText
	kContent
	kRefusal
	kToolCalls
	kFunctionCall
	kReasoning
	kReasoningContent
)

// readKey is scanKey that also names the key. The keys of OpenAI chunks
// are matched whole, with their quotes and colon, before any scan.
func readKey(p []byte, i int) (id keyID, key []byte, next int, ok bool) {
	if i+2 < len(p) && p[i] == '"' {
		q := p[i:]
		lit := func(s string) bool { return len(q) >= len(s) && string(q[:len(s)]) == s }
		var n int
		switch q[1] {
		case 'c':
			switch {
			case lit(`"content":`):
				id, n = kContent, 10
			case lit(`"choices":`):
				id, n = kChoices, 10
			case lit(`"created":`):
				id, n = kOther, 10
			}
		case 'd':
			if lit(`"delta":`) {
				id, n = kDelta, 8
			}
		case 'f':
			if lit(`"finish_reason":`) {
				id, n = kOther, 16
			}
		case 'i':
			switch {
			case lit(`"index":`):
				id, n = kOther, 8
			case lit(`"id":`):
				id, n = kOther, 5
			}
		case 'l':
			if lit(`"logprobs":`) {
				id, n = kOther, 11
			}
		case 'm':
			if lit(`"model":`) {
				id, n = kOther, 8
			}
		case 'o':
			if lit(`"object":`) {
				id, n = kObject, 9
			}
		case 'r':
			switch {
			case lit(`"role":`):
				id, n = kOther, 7
			case lit(`"reasoning":`):
				id, n = kReasoning, 12
			case lit(`"reasoning_content":`):
				id, n = kReasoningContent, 20
			}
		}
		if n > 0 {
			return id, q[1 : n-2], i + n, true
		}
	}
	key, next, ok = scanKey(p, i)
	switch string(key) {
	case "object":
		id = kObject
	case "choices":
		id = kChoices
	case "usage":
		id = kUsage
	case "error":
		id = kError
	case "delta":
		id = kDelta
	case "text":
		id = kText
	case "content":
		id = kContent
	case "refusal":
		id = kRefusal
	case "tool_calls":
		id = kToolCalls
	case "function_call":
		id = kFunctionCall
	case "reasoning":
		id = kReasoning
	case "reasoning_content":
		id = kReasoningContent
	}
	return id, key, next, ok
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
