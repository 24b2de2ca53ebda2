// Package prompt turns a trace's hash blocks into deterministic placeholder
// text of an exact token count, with a marker per play so that replays of a
// trace never hit each other's prefix cache while turns of one play do.
//
// By default a token is one whitespace-separated word: that is the contract
// with the built-in simulator, where the count is exact. Real tokenizers split
// these words into more tokens (a short random word is often 2-3), so for a
// real server Calibrate measures the served tokens per word and
// Builder.TokensPerWord scales the words written, so the served prompt has
// the planned token count.
package prompt

import (
	"encoding/binary"
	"math"
	"slices"
)

// DefaultBlockSize is the tokens per hash block when Builder.BlockSize is 0;
// Weka/AgentX traces use 64.
const DefaultBlockSize = 64

// MarkerWords is how many words of each prompt are the play marker.
const MarkerWords = 2

// Builder writes prompts. The zero value works (seed 0, 64-token blocks).
type Builder struct {
	Seed      uint64 // changes every block's text; plays of one run share it
	BlockSize int    // tokens per hash block; 0 means 64
	// TokensPerWord is the served model's tokens per placeholder word, from
	// Calibrate; 0 or 1 writes one word per token. Otherwise a prompt of n
	// tokens is round(n/TokensPerWord) words and a block round(BlockSize/
	// TokensPerWord) words (at least 1), so equal ids still give equal text.
	TokensPerWord float64
	// Memo, when set, is shared by the run's builders: a turn copies the
	// text of the blocks it shares with an earlier turn of its play (see
	// Memo). The text is the same with it or without it.
	Memo *Memo
}

// alphabet has 32 JSON-safe symbols, so one symbol is five random bits.
const alphabet = "abcdefghijklmnopqrstuvwxyz012345"

// Append appends a prompt of exactly tokens words to dst, separated by single
// spaces, with no leading or trailing space. The first two words are the play
// marker, unique per (traceID, play). Then each hash id in order gives
// BlockSize words that depend only on (Seed, traceID, id), so equal ids give
// byte-identical text; the last block is cut to hit tokens exactly, and if
// the ids run out, filler words from (traceID, play, position) make up the
// count. With TokensPerWord set, "tokens" above means words, scaled as the
// field says. Append does not allocate when dst has the capacity (nor, with
// a Memo, once the memo holds the play's earlier turns).
func (b Builder) Append(dst []byte, traceID string, play uint64, hashIDs []int64, tokens int) []byte {
	if tokens <= 0 {
		return dst
	}
	tokens, block, th, playKey := b.scaled(traceID, play, tokens)
	if b.Memo == nil || tokens <= MarkerWords {
		return b.appendFrom(dst, th, playKey, play, hashIDs, tokens, block)
	}
	// The blocks' text is the same in every play of the trace: the memo
	// holds it without the marker, for all of them.
	dst = appendMarker(dst, playKey, play)
	key := memoKey{trace: traceID, seed: b.Seed, block: block}
	return b.Memo.build(dst, key, hashIDs, min(len(hashIDs), (tokens-MarkerWords)/block), func(text []byte, ends *[]int, done int) []byte {
		return b.appendBlocks(text, ends, th, playKey, hashIDs, tokens, block, done)
	})
}

// appendFrom is Append without a memo.
func (b Builder) appendFrom(dst []byte, th, playKey, play uint64, hashIDs []int64, tokens, block int) []byte {
	if tokens == 1 {
		return appendSymbols(append(dst, 'p'), playKey, 12)
	}
	return b.appendBlocks(appendMarker(dst, playKey, play), nil, th, playKey, hashIDs, tokens, block, 0)
}

// appendMarker appends the play marker's two words.
func appendMarker(dst []byte, playKey, play uint64) []byte {
	dst = appendSymbols(append(dst, 'p'), playKey, 12)
	return appendNumber(append(dst, ' ', 'n'), play)
}

// appendBlocks appends what follows the marker (tokens words in all, the
// marker's included) from block done on; dst already holds the marker and
// the blocks before done. With ends set, it records where each full block
// ends, relative to where the first block starts (ends[0], 0), past the
// first len(*ends) already recorded (none when done is 0).
func (b Builder) appendBlocks(dst []byte, ends *[]int, th, playKey uint64, hashIDs []int64, tokens, block, done int) []byte {
	start := len(dst)
	if ends != nil {
		if done == 0 {
			*ends = append((*ends)[:0], 0)
		}
		start -= (*ends)[len(*ends)-1]
	}
	left := tokens - MarkerWords - done*block
	blockKey := mix(b.Seed^0x626c6f636b) ^ th
	for _, id := range hashIDs[done:] {
		if left == 0 {
			return dst
		}
		n := min(block, left)
		dst = appendWords(dst, mix(blockKey^mix(uint64(id))), n)
		left -= n
		if ends != nil && n == block && len(*ends) == done+1 {
			*ends = append(*ends, len(dst)-start)
			done++
		}
	}
	if left > 0 {
		// Filler: the position makes it differ from any block text.
		dst = appendWords(dst, mix(playKey^mix(uint64(tokens-left)^0x66696c6c)), left)
	}
	return dst
}

// scaled is a prompt's length and block length in words (tokens scaled by
// TokensPerWord), its trace's hash, and its play's marker key: the first
// word differs between any two plays of any trace with near certainty; the
// second spells the play number, so two plays of one trace never share it.
func (b Builder) scaled(traceID string, play uint64, tokens int) (words, block int, th, playKey uint64) {
	block = b.BlockSize
	if block <= 0 {
		block = DefaultBlockSize
	}
	if f := b.TokensPerWord; f > 0 && f != 1 {
		tokens = max(1, int(math.Round(float64(tokens)/f)))
		block = max(1, int(math.Round(float64(block)/f)))
	}
	th = hashString(traceID)
	return tokens, block, th, mix(b.Seed ^ mix(th^0x706c6179) ^ mix(play+0x9e3779b97f4a7c15))
}

// Len is len(Append(nil, traceID, play, hashIDs, tokens)), found without
// writing the text: a word's length is drawn as its symbols are, and the
// blocks a prompt shares with one the Memo holds are counted by the
// lengths the memo noted. Len changes nothing in the memo.
func (b Builder) Len(traceID string, play uint64, hashIDs []int64, tokens int) int {
	if tokens <= 0 {
		return 0
	}
	tokens, block, th, playKey := b.scaled(traceID, play, tokens)
	n := 1 + 12 // the marker's first word: 'p' and 12 symbols
	if tokens == 1 {
		return n
	}
	n += 2 + len(appendNumber(make([]byte, 0, 16), play))
	done := 0
	if b.Memo != nil && tokens > MarkerWords {
		key := memoKey{trace: traceID, seed: b.Seed, block: block}
		shared, k := b.Memo.shared(key, hashIDs, min(len(hashIDs), (tokens-MarkerWords)/block))
		n, done = n+shared, k
	}
	left := tokens - MarkerWords - done*block
	blockKey := mix(b.Seed^0x626c6f636b) ^ th
	for _, id := range hashIDs[done:] {
		if left == 0 {
			return n
		}
		k := min(block, left)
		n += wordsLen(mix(blockKey^mix(uint64(id))), k)
		left -= k
	}
	if left > 0 {
		n += wordsLen(mix(playKey^mix(uint64(tokens-left)^0x66696c6c)), left)
	}
	return n
}

// Text is one prompt, to be written when it is wanted (a request body as
// the server reads it) instead of held from the time it is planned: what
// Append writes for the same arguments. Its bytes are single spaces and
// the symbols [a-z0-5], none of which a JSON string escapes.
type Text struct {
	b      Builder
	trace  string
	play   uint64
	ids    []int64
	tokens int
	n      int
}

// Text is the prompt Append(dst, traceID, play, hashIDs, tokens) appends,
// its length known now (Len) and its bytes written by AppendTo. hashIDs
// must stay unchanged while the Text is in use.
func (b Builder) Text(traceID string, play uint64, hashIDs []int64, tokens int) *Text {
	return &Text{b: b, trace: traceID, play: play, ids: hashIDs, tokens: tokens, n: b.Len(traceID, play, hashIDs, tokens)}
}

// Len is the text's length in bytes.
func (t *Text) Len() int { return t.n }

// AppendTo appends the text to dst. With Len bytes of room in dst it
// writes within that room (a byte at a time where a word's 8-byte store
// would pass its end), so it allocates nothing.
func (t *Text) AppendTo(dst []byte) []byte {
	return t.b.Append(dst, t.trace, t.play, t.ids, t.tokens)
}

// MaxLen is an upper bound on the bytes Append adds for a prompt of tokens
// words (tokens, with TokensPerWord at 1 or more); give dst at least this spare capacity to keep Append allocation-free.
func MaxLen(tokens int) int {
	if tokens <= 0 {
		return 0
	}
	return 8*tokens + 24 // words are at most 7 bytes plus a space; the marker is longer
}

// appendWords appends n words drawn from state, each preceded by a space.
// Each word is written as one 8-byte store (a space and up to 7 symbols),
// then the end moves on by the word's length. Where fewer than 8 bytes of
// capacity are left, a word that still fits is written a byte at a time,
// so a dst with room for the words' exact length (a request body's
// reader, sized to the prompt) is written within it; one that does not
// fit grows dst by 8 bytes for each word left.
func appendWords(dst []byte, state uint64, n int) []byte {
	start := len(dst)
	buf := dst[:cap(dst)]
	pos := start
	for i := range n {
		state += 0x9e3779b97f4a7c15
		r := mix(state)
		l := 2 + int(r&7)%6 // 2 to 7 symbols; the low 3 bits pick the length
		r >>= 3
		w := uint64(' ') |
			uint64(pairs[r&1023])<<8 | uint64(pairs[r>>10&1023])<<24 |
			uint64(pairs[r>>20&1023])<<40 | uint64(alphabet[r>>30&31])<<56
		if pos+8 > len(buf) && pos+l+1 > len(buf) {
			buf = slices.Grow(buf[:pos], 8*(n-i)+8)
			buf = buf[:cap(buf)]
		}
		if pos+8 <= len(buf) {
			binary.LittleEndian.PutUint64(buf[pos:], w)
		} else {
			for k := range l + 1 {
				buf[pos+k] = byte(w >> (8 * k))
			}
		}
		pos += l + 1
	}
	return buf[:pos]
}

// wordsLen is the bytes appendWords(dst, state, n) appends.
func wordsLen(state uint64, n int) int {
	total := 0
	for range n {
		state += 0x9e3779b97f4a7c15
		total += 3 + int(mix(state)&7)%6 // a space and 2 to 7 symbols
	}
	return total
}

// pairs maps 10 random bits to two symbols, little-endian.
var pairs = func() (p [1024]uint16) {
	for i := range p {
		p[i] = uint16(alphabet[i&31]) | uint16(alphabet[i>>5])<<8
	}
	return p
}()

func appendSymbols(dst []byte, r uint64, n int) []byte {
	for range n {
		dst = append(dst, alphabet[r&31])
		r >>= 5
	}
	return dst
}

// appendNumber appends v in base 32 with the alphabet's symbols.
func appendNumber(dst []byte, v uint64) []byte {
	var tmp [13]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = alphabet[v&31]
		v >>= 5
		if v == 0 {
			break
		}
	}
	return append(dst, tmp[i:]...)
}

// mix is splitmix64's finaliser: a fast, well-spread 64-bit hash.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// hashString is FNV-1a over s.
func hashString(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return h
}
