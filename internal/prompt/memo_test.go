package prompt

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// With a memo, every prompt is byte for byte the prompt without one, over
// conversations that grow, subagents that share their start, cut blocks,
// filler, scaled words, other seeds and block lengths, and a memo too small
// to hold them all; and a growing conversation is copied, not rewritten.
func TestMemoMatchesAppend(t *testing.T) {
	for _, tc := range []struct {
		name   string
		b      Builder
		budget int
	}{
		{"default", Builder{Seed: 7}, MemoBytes},
		{"scaled words, 16-token blocks", Builder{Seed: 9, BlockSize: 16, TokensPerWord: 1.7}, MemoBytes},
		{"tiny budget", Builder{Seed: 7, BlockSize: 8}, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			memo := NewMemo(tc.budget)
			with := tc.b
			with.Memo = memo
			r := rand.New(rand.NewPCG(5, 6))
			type conv struct {
				trace string
				play  uint64
				ids   []int64
			}
			var convs []*conv
			for i := range 6 {
				convs = append(convs, &conv{trace: fmt.Sprintf("trace_%d", i%3), play: uint64(i / 3), ids: ids(1000*i, 4)})
			}
			// other plays of a trace replaying the same conversation
			convs = append(convs, &conv{trace: "trace_0", play: 40, ids: ids(0, 4)}, &conv{trace: "trace_1", play: 1 << 33, ids: ids(1000, 4)})
			for step := range 600 {
				c := convs[r.IntN(len(convs))]
				ids := c.ids
				switch r.IntN(4) {
				case 0, 1: // the next turn: more blocks
					c.ids = append(c.ids, ids[len(ids)-1]+1+int64(r.IntN(3)))
					ids = c.ids
				case 2: // a subagent: the start, then its own blocks
					ids = append(append([]int64(nil), ids[:r.IntN(len(ids))]...), int64(-step), int64(-step-1))
				}
				block := max(tc.b.BlockSize, 1)
				if tc.b.BlockSize == 0 {
					block = DefaultBlockSize
				}
				tokens := []int{1, 2, 3, len(ids) * block, len(ids)*block + 2, len(ids)*block - r.IntN(block), len(ids)*block + 3*block + 5}[r.IntN(7)]
				want := tc.b.Append([]byte("head:"), c.trace, c.play, ids, tokens)
				got := with.Append([]byte("head:"), c.trace, c.play, ids, tokens)
				if !bytes.Equal(got, want) {
					t.Fatalf("step %d (%s play %d, %d ids, %d tokens): with the memo\n%.200s\nwithout\n%.200s", step, c.trace, c.play, len(ids), tokens, got, want)
				}
				n := len(want) - len("head:")
				if l, ml := tc.b.Len(c.trace, c.play, ids, tokens), with.Len(c.trace, c.play, ids, tokens); l != n || ml != n {
					t.Fatalf("step %d (%s play %d, %d ids, %d tokens): Len %d, with the memo %d; Append wrote %d bytes", step, c.trace, c.play, len(ids), tokens, l, ml, n)
				}
				// a Text written into exactly its room stays there
				text := with.Text(c.trace, c.play, ids, tokens)
				room := make([]byte, 3, 3+text.Len())
				if out := text.AppendTo(room); !bytes.Equal(out[3:], want[len("head:"):]) || cap(out) != cap(room) {
					t.Fatalf("step %d: Text.AppendTo into %d bytes of room wrote %d bytes (capacity %d, want %d)", step, text.Len(), len(out)-3, cap(out), cap(room))
				}
			}
			if memo.held > memo.budget {
				t.Errorf("memo holds %d bytes, over its budget %d", memo.held, memo.budget)
			}
			if tc.budget == MemoBytes && memo.copied == 0 {
				t.Error("no prompt was copied from the memo")
			}
		})
	}
}

// BenchmarkMemo builds a heavy session's next turn (135K tokens) after its
// turn (134K), with and without a memo.
func BenchmarkMemo(b *testing.B) {
	prev, next := ids(0, 134_000/64), ids(0, 135_000/64)
	for _, memo := range []bool{true, false} {
		b.Run(fmt.Sprintf("memo=%v", memo), func(b *testing.B) {
			bld := Builder{Seed: 1}
			if memo {
				bld.Memo = NewMemo(MemoBytes)
			}
			dst := make([]byte, 0, MaxLen(135_000))
			for b.Loop() {
				dst = bld.Append(dst[:0], "trace", 0, prev, 134_000)
				dst = bld.Append(dst[:0], "trace", 0, next, 135_000)
			}
		})
	}
}

// Plays of one trace share the text of their blocks through the memo; each
// keeps its own marker and filler.
func TestMemoSharesBlocksAcrossPlays(t *testing.T) {
	plain := Builder{Seed: 5}
	with := plain
	with.Memo = NewMemo(MemoBytes)
	conv := ids(0, 40)
	first := with.Append(nil, "trace", 1, conv[:30], 30*64+10)
	if want := plain.Append(nil, "trace", 1, conv[:30], 30*64+10); !bytes.Equal(first, want) {
		t.Fatal("play 1 differs with the memo")
	}
	for _, play := range []uint64{2, 1000, 1 << 40} {
		for _, n := range []int{30, 10, 40} {
			before := with.Memo.copied
			got := with.Append(nil, "trace", play, conv[:n], n*64+7)
			if want := plain.Append(nil, "trace", play, conv[:n], n*64+7); !bytes.Equal(got, want) {
				t.Fatalf("play %d, %d blocks: differs with the memo", play, n)
			}
			if l := with.Len("trace", play, conv[:n], n*64+7); l != len(got) {
				t.Fatalf("play %d, %d blocks: Len %d, wrote %d", play, n, l, len(got))
			}
			// the blocks play 1 wrote (30 of them) are copied, not written
			if copied := with.Memo.copied - before; copied < int64(len(got))*min(int64(n), 30)/int64(n)-200 {
				t.Errorf("play %d, %d blocks: %d of %d bytes copied from the memo", play, n, copied, len(got))
			}
		}
	}
}
