package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// conversationBodies are bodies as agents send them, in order: a session's
// turns (each its prompt so far and more), a subagent that shares the
// session's start, other sessions, and bodies that share a start with an
// earlier one but differ in what the scan reads (roles, message splits,
// escapes, whitespace, content parts).
func conversationBodies() [][]byte {
	var out [][]byte
	user := func(prompt string, maxTokens int) []byte {
		return []byte(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`, prompt, maxTokens))
	}
	sys := words("sys", 0, 700)
	turn := sys
	for i := range 6 {
		turn += " " + words(fmt.Sprintf("t%d-", i), 0, 300+50*i)
		out = append(out, user(turn, 10+i))
		// A subagent of the same session: the same start, its own turns.
		out = append(out, user(sys+" "+words(fmt.Sprintf("sub%d-", i), 0, 900), 5))
	}
	// Another session.
	out = append(out, user(words("other", 0, 2000), 7))
	// The same text split at a different place, or as two messages, or with
	// the role after the content, or another role.
	two := func(a, b, role string) []byte {
		return []byte(fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":%q},{"content":%q,"role":%q}],"max_tokens":3}`, a, b, role))
	}
	out = append(out, two(sys, turn, "user"), two(sys, turn, "assistant"), two(sys+" extra", turn, "user"), two(sys, turn+" more", "user"))
	// Whitespace runs, escapes, \u spaces, surrogates and non-ASCII words
	// at and around block boundaries, then the same body grown.
	odd := turn + "\n\t  tab\u2003em\u00a0nb caf\u00e9 \U0001F600 \"q\" back\\slash  "
	out = append(out, user(odd, 1), user(odd+words("late", 0, 400), 1), user(strings.ReplaceAll(odd, " ", "\n"), 1))
	// A body the scan refuses after a long shared start, then the good one.
	bad := user(turn+" x", 1)
	bad[len(bad)-60] = '\x01'
	out = append(out, bad, user(turn+" x", 1))
	// Content parts: not resumed, still the same scan.
	out = append(out, []byte(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":%q},{"type":"text","text":"tail"}]}]}`, turn)))
	return out
}

// A cached scan is the full scan, to the last bit, for every body in any
// order, and conversations that grow are resumed, not scanned again.
func TestScanCacheMatchesFullScan(t *testing.T) {
	bodies := conversationBodies()
	for _, order := range []string{"in order", "shuffled", "tiny budget"} {
		t.Run(order, func(t *testing.T) {
			c := newScanCache(scanCacheBytes)
			seq := append([][]byte(nil), bodies...)
			switch order {
			case "shuffled":
				r := rand.New(rand.NewPCG(1, 2))
				r.Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
				seq = append(seq, seq...) // every body again, now with a cached twin
			case "tiny budget":
				c = newScanCache(40 << 10)
			}
			for i, b := range seq {
				want, wantScan, wantOK := fastChat(b, 16)
				got, gotScan, gotOK := c.fastChat(b, 16)
				if gotOK != wantOK {
					t.Fatalf("body %d: cached fast path %v, uncached %v", i, gotOK, wantOK)
				}
				if !gotOK {
					continue
				}
				if d := sameChat(got, gotScan, want, wantScan); d != "" {
					t.Fatalf("body %d (%d bytes): %s: %d words and %d blocks, want %d and %d", i, len(b), d, gotScan.words, len(gotScan.hashes), wantScan.words, len(wantScan.hashes))
				}
			}
			if c.held > c.budget {
				t.Errorf("cache holds %d bytes, over its budget of %d", c.held, c.budget)
			}
			if order == "in order" && c.skipped < int64(len(bodies[len(bodies)-1])) {
				t.Errorf("resumed scans skipped only %d bytes", c.skipped)
			}
		})
	}
}

// Random edits anywhere in a grown body: the cached scan still matches.
func TestScanCacheEditedBodies(t *testing.T) {
	base := []byte(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}],"max_tokens":5}`, words("w", 0, 3000)+" caf\u00e9\t\u2003end"))
	r := rand.New(rand.NewPCG(3, 4))
	c := newScanCache(scanCacheBytes)
	alphabet := []byte(" a\\\"\n\tu0é{}[],:")
	for i := range 400 {
		b := append([]byte(nil), base...)
		for range 1 + r.IntN(3) {
			at := r.IntN(len(b))
			switch r.IntN(3) {
			case 0:
				b[at] = alphabet[r.IntN(len(alphabet))]
			case 1:
				b = append(b[:at:at], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[at:]...)...)
			case 2:
				b = append(b[:at:at], b[at+1:]...)
			}
		}
		want, wantScan, wantOK := fastChat(b, 4)
		got, gotScan, gotOK := c.fastChat(b, 4)
		if gotOK != wantOK {
			t.Fatalf("edit %d: cached fast path %v, uncached %v", i, gotOK, wantOK)
		}
		if gotOK {
			if d := sameChat(got, gotScan, want, wantScan); d != "" {
				t.Fatalf("edit %d: %s", i, d)
			}
		}
	}
}

// BenchmarkScanCache reads a heavy session's next turn (135K words, 1 MB)
// right after its turn (134K words), with and without a scan cache.
func BenchmarkScanCache(b *testing.B) {
	prev := chatJSON("m", words("w", 0, 134_000), 100, true)
	next := chatJSON("m", words("w", 0, 135_000), 100, true)
	b.Run("cached", func(b *testing.B) {
		b.SetBytes(int64(len(next)))
		for range b.N {
			b.StopTimer()
			c := newScanCache(scanCacheBytes)
			c.fastChat(prev, 16)
			b.StartTimer()
			if _, _, ok := c.fastChat(next, 16); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		b.SetBytes(int64(len(next)))
		for range b.N {
			if _, _, ok := fastChat(next, 16); !ok {
				b.Fatal("refused")
			}
		}
	})
}
