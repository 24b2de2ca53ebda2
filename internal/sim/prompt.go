package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"
)

// promptScan counts a prompt's tokens and hashes its prefix-cache blocks in one
// pass over the raw JSON strings of a request, without decoding them into Go
// strings first.
//
// The tokenisation rule is a contract with the load generator: a token is a
// whitespace-separated word (the same split as strings.Fields), counted across
// all message contents, with nothing added for a chat template. Block j's hash
// chains the hash of block j-1 with the words of block j, so equal prefixes
// share blocks and prompts that differ in their first block share none.
type promptScan struct {
	blockSize int
	words     int
	hashes    []uint64 // one per full block of blockSize words

	inWord   bool
	wordHash uint64 // FNV-1a of the current word's decoded bytes
	blockAcc uint64 // running hash of the words of the current block
	inBlock  int    // words in the current block
	parent   uint64 // hash of the previous full block

	// With track set, cps gets a checkpoint for every block that a byte of
	// a message's content string ended: a scan cache resumes there (see
	// scanCache). msg is the message being scanned.
	track bool
	msg   int
	cps   []checkpoint

	// prev is the cached scan of the earlier turn this one resumed from,
	// and entry the one caching this scan (nil without a scan cache).
	prev, entry *scanEntry
}

// checkpoint is where in a body a block ended: off is just past the
// whitespace that ended its last word, inside the content string of
// message msg. The scan's state there is block's hash as parent and
// nothing pending, so a scan of another body with the same bytes up to
// off can go on from it.
type checkpoint struct{ off, block, msg int32 }

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
	// boundaryTag marks the end of a message in the block hash, so "a b" + "c"
	// and "a" + "b c" share no block although their words are equal.
	boundaryTag = 0x9e3779b97f4a7c15
)

// mix64 is a fast 64-bit finaliser (splitmix64) used to chain hashes.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func newPromptScan(blockSize, sizeHint int) *promptScan {
	// A word is at least two bytes of JSON (a letter and a space), so this
	// preallocation is at most twice what is needed and usually close.
	return &promptScan{blockSize: blockSize, hashes: make([]uint64, 0, sizeHint/(2*blockSize)+1)}
}

func (p *promptScan) addByte(b byte) {
	if !p.inWord {
		p.inWord = true
		p.wordHash = fnvOffset
	}
	p.wordHash = (p.wordHash ^ uint64(b)) * fnvPrime
}

func (p *promptScan) addRune(r rune) {
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	for _, b := range buf[:n] {
		p.addByte(b)
	}
}

// space ends the current word, if any, and reports whether that ended a
// block.
func (p *promptScan) space() bool {
	if !p.inWord {
		return false
	}
	p.inWord = false
	p.words++
	p.blockAcc = mix64(p.blockAcc ^ p.wordHash)
	p.inBlock++
	if p.inBlock == p.blockSize {
		h := mix64(p.parent*fnvPrime ^ p.blockAcc)
		p.hashes = append(p.hashes, h)
		p.parent = h
		p.blockAcc = 0
		p.inBlock = 0
		return true
	}
	return false
}

// cpEvery is how many blocks apart checkpoints are: a resumed scan reads
// again at most this many blocks of what it shares, and a cached body keeps
// a checkpoint per this many blocks.
const cpEvery = 8

// mark records a checkpoint at body offset off (tracking only).
func (p *promptScan) mark(off int) {
	if p.track && off >= 0 && len(p.hashes)%cpEvery == 0 {
		p.cps = append(p.cps, checkpoint{int32(off), int32(len(p.hashes) - 1), int32(p.msg)})
	}
}

// resume puts the scan where a scan of an earlier body stood at cp: the
// first cp.block+1 block hashes of hashes (copied), nothing pending.
func (p *promptScan) resume(hashes []uint64, cps []checkpoint, cp int) {
	c := cps[cp]
	p.hashes = append(p.hashes[:0], hashes[:c.block+1]...)
	p.parent = hashes[c.block]
	p.words = int(c.block+1) * p.blockSize
	p.blockAcc, p.inBlock, p.inWord = 0, 0, false
	if p.track {
		p.cps = append(p.cps[:0], cps[:cp+1]...)
	}
}

// boundary ends the current word and marks a message boundary (tagged with
// the role) in the current block's hash.
func (p *promptScan) boundary(role string) {
	p.space()
	h := uint64(boundaryTag)
	for i := 0; i < len(role); i++ {
		h = (h ^ uint64(role[i])) * fnvPrime
	}
	p.blockAcc = mix64(p.blockAcc ^ h)
}

// asciiSpace marks the ASCII bytes unicode.IsSpace accepts.
var asciiSpace = [128]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// wordByte marks the bytes a JSON string holds as written that belong to a
// word: printable ASCII but the space and the backslash.
var wordByte = func() (t [256]bool) {
	for c := 0x21; c < utf8.RuneSelf; c++ {
		t[c] = c != '\\'
	}
	return t
}()

// addJSONString feeds one raw JSON string literal (quotes included), which
// it checks as encoding/json would (escapes, no raw control characters; the
// caller found the closing quote). Escapes are decoded so the same text
// hashes the same whichever way it was escaped.
func (p *promptScan) addJSONString(raw []byte) error { return p.addJSONStringAt(raw, -1) }

// addJSONStringAt is addJSONString for a string at body offset at (-1:
// not in the body), where checkpoints are marked.
func (p *promptScan) addJSONStringAt(raw []byte, at int) error {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return errors.New("expected a JSON string")
	}
	base := -1
	if at >= 0 {
		base = at + 1
	}
	return p.addStringBody(raw[1:len(raw)-1], base)
}

// addStringBody feeds the inside of a JSON string, s, found at body offset
// base (-1: not in the body).
func (p *promptScan) addStringBody(s []byte, base int) error {
	if base < 0 {
		base = math.MinInt32 // marks nothing
	}
	for i := 0; i < len(s); {
		c := s[i]
		if wordByte[c] {
			// A run of plain ASCII word bytes, hashed in registers (the
			// bulk of any prompt).
			h := p.wordHash
			if !p.inWord {
				p.inWord, h = true, fnvOffset
			}
			for ; i < len(s) && wordByte[s[i]]; i++ {
				h = (h ^ uint64(s[i])) * fnvPrime
			}
			p.wordHash = h
			continue
		}
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return errors.New("truncated escape in JSON string")
			}
			e := s[i+1]
			i += 2
			switch e {
			case 'n', 't', 'r', 'f':
				if p.space() {
					p.mark(base + i)
				}
			case 'b':
				p.addByte('\b')
			case '"', '\\', '/':
				p.addByte(e)
			case 'u':
				r, n, err := decodeUnicodeEscape(s[i-2:])
				if err != nil {
					return err
				}
				i += n - 2
				if !unicode.IsSpace(r) {
					p.addRune(r)
				} else if p.space() {
					p.mark(base + i)
				}
			default:
				return fmt.Errorf("invalid escape \\%c in JSON string", e)
			}
		case c < 0x20:
			return errors.New("control character in JSON string")
		case c < utf8.RuneSelf:
			i++
			if !asciiSpace[c] {
				p.addByte(c)
			} else if p.space() {
				p.mark(base + i)
			}
		default:
			r, n := utf8.DecodeRune(s[i:])
			if !unicode.IsSpace(r) {
				for _, b := range s[i : i+n] {
					p.addByte(b)
				}
				i += n
			} else if i += n; p.space() {
				p.mark(base + i)
			}
		}
	}
	return nil
}

// decodeUnicodeEscape decodes \uXXXX (and a following low surrogate) at the
// start of s, returning the rune and the bytes consumed.
func decodeUnicodeEscape(s []byte) (rune, int, error) {
	r, ok := hex4(s)
	if !ok {
		return 0, 0, errors.New("invalid \\u escape in JSON string")
	}
	if r >= 0xD800 && r < 0xDC00 {
		if lo, ok := hex4(s[6:]); ok && lo >= 0xDC00 && lo < 0xE000 {
			return (r-0xD800)<<10 | (lo - 0xDC00) + 0x10000, 12, nil
		}
		return utf8.RuneError, 6, nil
	}
	return r, 6, nil
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range s[2:6] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// contentPart is one element of an array-valued message content.
type contentPart struct {
	Type string          `json:"type"`
	Text json.RawMessage `json:"text"`
}

// addContent feeds a message content: a string, an array of parts (only
// "text" parts count), or null.
func (p *promptScan) addContent(raw json.RawMessage) error { return p.addContentAt(raw, -1) }

// addContentAt is addContent for a content value at body offset at (-1:
// not in the body); only a string content marks checkpoints.
func (p *promptScan) addContentAt(raw json.RawMessage, at int) error {
	for len(raw) > 0 && raw[0] < utf8.RuneSelf && asciiSpace[raw[0]] {
		raw = raw[1:]
		if at >= 0 {
			at++
		}
	}
	raw = trimJSONSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	switch raw[0] {
	case '"':
		return p.addJSONStringAt(raw, at)
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return fmt.Errorf("content parts: %w", err)
		}
		for _, part := range parts {
			if part.Type != "text" {
				continue
			}
			t := trimJSONSpace(part.Text)
			if len(t) == 0 || string(t) == "null" {
				continue
			}
			if err := p.addJSONString(t); err != nil {
				return err
			}
			p.space()
		}
		return nil
	default:
		return errors.New("content must be a string or an array of {type, text} parts")
	}
}

func trimJSONSpace(b []byte) []byte {
	for len(b) > 0 && b[0] < utf8.RuneSelf && asciiSpace[b[0]] {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] < utf8.RuneSelf && asciiSpace[b[len(b)-1]] {
		b = b[:len(b)-1]
	}
	return b
}

// digest is a hash of the whole prompt (every word and message boundary),
// valid after finish.
func (p *promptScan) digest() uint64 {
	return mix64(p.parent*fnvPrime ^ p.blockAcc ^ uint64(p.words)<<32 ^ uint64(p.inBlock))
}

// finish ends the last word; the partial last block is not hashed (only full
// blocks are cacheable, as in vLLM). The hashes are then cut to their length
// when the size hint left them much room: they live as long as their
// request, and a fleet holds thousands.
func (p *promptScan) finish() {
	p.space()
	if n := len(p.hashes); cap(p.hashes) > n+n/4+16 {
		p.hashes = append(make([]uint64, 0, n), p.hashes...)
	}
}
