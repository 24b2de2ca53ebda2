package prompt

import (
	"bytes"
	"strings"
	"testing"
)

func ids(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

// words splits a prompt, failing on anything but single spaces between
// non-empty [a-z0-9] words.
func words(t *testing.T, p []byte) []string {
	t.Helper()
	if len(p) == 0 {
		return nil
	}
	ws := strings.Split(string(p), " ")
	for i, w := range ws {
		if w == "" {
			t.Fatalf("empty word at %d: double, leading or trailing space", i)
		}
		for _, c := range []byte(w) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				t.Fatalf("word %d %q has byte %q outside [a-z0-9]", i, w, c)
			}
		}
	}
	return ws
}

func TestAppendExactCount(t *testing.T) {
	b := Builder{Seed: 7}
	cases := []struct {
		name   string
		ids    []int64
		tokens int
	}{
		{"nothing", ids(1, 3), 0},
		{"marker's first word only", ids(1, 3), 1},
		{"marker only", ids(1, 3), 2},
		{"inside the first block", ids(1, 3), 63},
		{"one block and a bit", ids(1, 3), 64},
		{"crossing into the second block", ids(1, 3), 65},
		{"ids run out: filler", ids(1, 3), 1000},
		{"no ids at all", nil, 100},
		{"a long prompt", ids(1, 2400), 150000},
		{"a long prompt past its ids", ids(1, 100), 150000},
	}
	for _, c := range cases {
		p := b.Append(nil, "trace_0001", 3, c.ids, c.tokens)
		if got := len(words(t, p)); got != c.tokens {
			t.Errorf("%s: %d words, want %d", c.name, got, c.tokens)
		}
		if len(p) > MaxLen(c.tokens) {
			t.Errorf("%s: %d bytes, over MaxLen %d", c.name, len(p), MaxLen(c.tokens))
		}
	}
}

func TestAppendSharing(t *testing.T) {
	b := Builder{Seed: 1}
	base := b.Append(nil, "tr", 0, ids(1, 10), 10*64+2)
	cases := []struct {
		name       string
		got        []byte
		sameMarker bool // the first two words equal base's
		sameBlocks int  // how many leading block words equal base's after the marker
	}{
		// Determinism: the same call again gives the same bytes.
		{"same call", b.Append(nil, "tr", 0, ids(1, 10), 10*64+2), true, 640},
		// The next turn of a play extends the ids: it shares all of base.
		{"next turn", b.Append(nil, "tr", 0, ids(1, 20), 20*64+2), true, 640},
		// Another play: a new marker, but the same block text after it.
		{"another play", b.Append(nil, "tr", 1, ids(1, 10), 10*64+2), false, 640},
		// A diverging id: text equal up to the block that differs.
		{"diverging at block 4", b.Append(nil, "tr", 0, append(ids(1, 3), 99, 5, 6), 6*64+2), true, 3 * 64},
		// Another trace: its blocks' text differs even for equal ids.
		{"another trace", b.Append(nil, "other", 0, ids(1, 10), 10*64+2), false, 0},
		// Another seed: different text too.
		{"another seed", Builder{Seed: 2}.Append(nil, "tr", 0, ids(1, 10), 10*64+2), false, 0},
	}
	bw := words(t, base)
	for _, c := range cases {
		gw := words(t, c.got)
		if same := gw[0] == bw[0] && gw[1] == bw[1]; same != c.sameMarker {
			t.Errorf("%s: marker equal = %v, want %v", c.name, same, c.sameMarker)
		}
		n := 0
		for n+2 < len(gw) && n+2 < len(bw) && gw[n+2] == bw[n+2] {
			n++
		}
		// Random words can agree by chance for a word or two.
		if n < c.sameBlocks || n > c.sameBlocks+2 {
			t.Errorf("%s: %d leading block words equal, want %d", c.name, n, c.sameBlocks)
		}
	}
}

func TestAppendVaried(t *testing.T) {
	p := Builder{}.Append(nil, "tr", 0, ids(1, 100), 6400)
	distinct := map[string]bool{}
	for _, w := range words(t, p) {
		distinct[w] = true
	}
	// 6,400 random words of 2-7 symbols from 32: nearly all distinct.
	if len(distinct) < 5000 {
		t.Errorf("only %d distinct words in 6400", len(distinct))
	}
}

func TestAppendKeepsDst(t *testing.T) {
	dst := []byte("prefix:")
	p := Builder{}.Append(dst, "tr", 0, ids(1, 2), 5)
	if !bytes.HasPrefix(p, []byte("prefix:")) {
		t.Fatalf("Append lost dst's content: %q", p)
	}
	if got := (Builder{}).Append(nil, "tr", 0, ids(1, 2), 5); !bytes.Equal(p[len("prefix:"):], got) {
		t.Errorf("appended text %q differs from a fresh one %q", p[7:], got)
	}
}

func TestAppendAllocationFree(t *testing.T) {
	b := Builder{Seed: 3}
	hs := ids(1, 2400)
	dst := make([]byte, 0, MaxLen(150000))
	allocs := testing.AllocsPerRun(5, func() {
		dst = b.Append(dst[:0], "trace_0001", 9, hs, 150000)
	})
	if allocs != 0 {
		t.Errorf("Append allocated %v times per call with capacity given, want 0", allocs)
	}
}

func BenchmarkAppend150K(b *testing.B) {
	bl := Builder{Seed: 3}
	hs := ids(1, 150000/64+1)
	dst := make([]byte, 0, MaxLen(150000))
	b.ReportAllocs()
	dst = bl.Append(dst[:0], "trace_0001", 0, hs, 150000)
	b.SetBytes(int64(len(dst)))
	b.ResetTimer()
	for i := range b.N {
		dst = bl.Append(dst[:0], "trace_0001", uint64(i), hs, 150000)
	}
}

// Len is the length Append writes, for every case of TestAppendExactCount's
// kind and scaled words, and a Text written into exactly its room (with
// room for its last words' 8-byte stores or not) is Append's text.
func TestLenAndText(t *testing.T) {
	for _, b := range []Builder{{Seed: 7}, {Seed: 3, BlockSize: 16, TokensPerWord: 2.3}, {Seed: 1, BlockSize: 1}} {
		for _, c := range []struct {
			ids    []int64
			tokens int
		}{
			{ids(1, 3), 0}, {ids(1, 3), 1}, {ids(1, 3), 2}, {ids(1, 3), 3}, {ids(1, 3), 63}, {ids(1, 3), 64},
			{ids(1, 3), 65}, {ids(1, 3), 1000}, {nil, 100}, {ids(1, 2400), 150000}, {ids(1, 100), 150000},
		} {
			for _, play := range []uint64{0, 31, 32, 1 << 40} {
				want := b.Append(nil, "trace_0001", play, c.ids, c.tokens)
				if n := b.Len("trace_0001", play, c.ids, c.tokens); n != len(want) {
					t.Fatalf("%+v play %d, %d ids, %d tokens: Len %d, Append wrote %d", b, play, len(c.ids), c.tokens, n, len(want))
				}
				text := b.Text("trace_0001", play, c.ids, c.tokens)
				for _, spare := range []int{0, 1, 7, 8, 600} {
					room := make([]byte, 0, text.Len()+spare)
					out := text.AppendTo(room)
					if !bytes.Equal(out, want) || cap(out) != cap(room) {
						t.Fatalf("%+v play %d, %d tokens, %d spare: AppendTo wrote %d bytes at capacity %d, want %d at %d", b, play, c.tokens, spare, len(out), cap(out), len(want), cap(room))
					}
				}
			}
		}
	}
}
