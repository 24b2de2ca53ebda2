package load

import (
	"bytes"
	"fmt"
	"unsafe"
)

// Prompt is a prompt's text, written when a request body is read rather
// than held from the time the request is planned (prompt.Text is one).
type Prompt interface {
	// Len is the text's length in bytes.
	Len() int
	// AppendTo appends exactly Len bytes to dst; with that much room in
	// dst it writes there, within len(dst)+Len bytes.
	AppendTo(dst []byte) []byte
}

// promptBody is the request JSON around p, as a body that writes p's text
// when it is read. A model name JSON must escape takes the slow path: the
// text is written now, the JSON escaped as body writes it.
func (c *Client) promptBody(buf *bytes.Buffer, p Prompt, maxTokens int) *chatBody {
	if !plainJSON([]byte(c.model)) {
		return c.requestBody(buf, p.AppendTo(make([]byte, 0, p.Len())), maxTokens)
	}
	head, tail := c.around(buf, maxTokens)
	return &chatBody{parts: [3][]byte{head, nil, tail}, src: p, plen: p.Len(), pool: &c.prompts}
}

// unwritten reports whether the prompt is next to read and not written yet.
func (b *chatBody) unwritten() bool { return b.src != nil && b.i <= 1 && b.parts[1] == nil }

// writePrompt writes the prompt's text into dst, which is exactly its
// length: a reader with room for the whole prompt gets it without a copy.
func (b *chatBody) writePrompt(dst []byte) error {
	out := b.src.AppendTo(dst[:0:len(dst)]) // nothing past dst: the reader's bytes after it are not ours
	if len(out) != len(dst) {
		return fmt.Errorf("the prompt wrote %d bytes, not the %d its length said: the request body would not be valid", len(out), len(dst))
	}
	if len(out) > 0 && unsafe.SliceData(out) != unsafe.SliceData(dst) {
		copy(dst, out) // it grew into a buffer of its own: still the right text
	}
	return nil
}

// materialize writes the prompt into a buffer of the pool's, for a reader
// that takes it in pieces.
func (b *chatBody) materialize() error {
	bp := b.pool.Get().(*[]byte)
	*bp = b.src.AppendTo((*bp)[:0])
	if len(*bp) != b.plen {
		b.pool.Put(bp)
		return fmt.Errorf("the prompt wrote %d bytes, not the %d its length said: the request body would not be valid", len(*bp), b.plen)
	}
	b.mat, b.parts[1] = bp, *bp
	if b.i == 1 && b.plen == 0 {
		b.i, b.off = 2, 0
	}
	return nil
}

// unmaterialize gives the prompt's buffer back once the body was read to
// its end: nothing reads it again (a resent request reads a body of its
// own, from again).
func (b *chatBody) unmaterialize() {
	if b.mat == nil || b.i < len(b.parts) {
		return
	}
	b.parts[1] = nil
	b.pool.Put(b.mat)
	b.mat = nil
}
