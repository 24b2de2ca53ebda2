package load

import (
	"encoding/binary"
	"math/bits"
)

// The fast path's scanners: each reads one compact JSON token or value at
// p[i] and returns the index after it, validating it as encoding/json would
// and failing on anything it does not accept (whitespace included).

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

// scanKey reads an object key at p[i] and the colon after it, returning the
// key's bytes and the index of its value. A key with an escape or a byte
// outside printable ASCII is not sure: encoding/json would unescape or fold
// it onto a field name.
func scanKey(p []byte, i int) (key []byte, next int, ok bool) {
	if i >= len(p) || p[i] != '"' {
		return nil, i, false
	}
	q := p[i+1:]
	j := 0
	for ; j+8 <= len(q); j += 8 {
		if m := stopKey(binary.LittleEndian.Uint64(q[j:])); m != 0 {
			j += bits.TrailingZeros64(m) >> 3
			break
		}
	}
	for j < len(q) && plainKey[q[j]] {
		j++
	}
	if j+1 >= len(q) || q[j] != '"' || q[j+1] != ':' {
		return nil, i, false
	}
	return q[:j], i + j + 3, true
}

// SWAR (eight bytes in a word) tests for the scanners: a word's bytes from
// the lowest are its bytes in memory order, and in the masks they return the
// lowest set high bit marks the first byte that stops the scan (the bits
// above it may be wrong; only the lowest is read).
const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// swarEq marks the bytes of w equal to b.
func swarEq(w uint64, b byte) uint64 {
	x := w ^ (swarLo * uint64(b))
	return (x - swarLo) &^ x & swarHi
}

// stopStr marks the bytes a string scan stops at: control characters,
// quote and backslash.
func stopStr(w uint64) uint64 {
	return (w-swarLo*0x20)&^w&swarHi | swarEq(w, '"') | swarEq(w, '\\')
}

// stopKey marks the bytes a key scan stops at: those of stopStr, DEL and
// every byte outside ASCII.
func stopKey(w uint64) uint64 { return stopStr(w) | swarEq(w, 0x7f) | w&swarHi }

// scanString reads the string at p[i] (its opening quote) and returns the
// index after its closing quote and whether it held an escape.
func scanString(p []byte, i int) (end int, escaped, ok bool) {
	i++
	for {
		q := p[i:]
		j := 0
		for ; j+8 <= len(q); j += 8 {
			if m := stopStr(binary.LittleEndian.Uint64(q[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
		}
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
