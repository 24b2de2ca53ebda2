package sim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// scanString feeds one Go string as a JSON string literal.
func scanString(t testing.TB, blockSize int, s string) *promptScan {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return scanRaw(t, blockSize, string(raw))
}

func scanRaw(t testing.TB, blockSize int, raw string) *promptScan {
	t.Helper()
	p := newPromptScan(blockSize, len(raw))
	if err := p.addJSONString([]byte(raw)); err != nil {
		t.Fatalf("scan %s: %v", raw, err)
	}
	p.finish()
	return p
}

func TestPromptScanCountsWords(t *testing.T) {
	tests := []struct {
		name string
		raw  string // a JSON string literal
		want int
	}{
		// Plain words separated by single spaces.
		{"plain", `"one two three"`, 3},
		// Runs of whitespace and leading/trailing space do not make words.
		{"runs", `"  one   two  "`, 2},
		// Escaped newlines, tabs and carriage returns separate words.
		{"escaped controls", `"a\nb\tc\rd\fe"`, 5},
		// A \u escape of a space separates; of a letter joins.
		{"unicode escapes", `"a\u0020b c\u0064e"`, 3},
		// Unicode spaces (no-break space, ideographic space) separate, as in strings.Fields.
		{"unicode spaces", "\"a\u00a0b\u3000c\"", 3},
		// Escaped quotes and backslashes are word characters.
		{"escaped quote", `"say \"hi\" \\o/"`, 3},
		// A surrogate pair is one (non-space) character.
		{"surrogate pair", `"x\ud83d\ude00y z"`, 2},
		// Empty.
		{"empty", `""`, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var decoded string
			if err := json.Unmarshal([]byte(tc.raw), &decoded); err != nil {
				t.Fatal(err)
			}
			if f := len(strings.Fields(decoded)); f != tc.want {
				t.Fatalf("test table wrong: strings.Fields gives %d", f)
			}
			if got := scanRaw(t, 4, tc.raw).words; got != tc.want {
				t.Errorf("words = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPromptScanBlockHashes(t *testing.T) {
	// Escaping does not change the hash of the same text.
	if a, b := scanRaw(t, 1, `"café a b"`).hashes, scanRaw(t, 1, `"caf\u00e9\u0020a b"`).hashes; !slices.Equal(a, b) {
		t.Errorf("the same words escaped differently hash differently: %x vs %x", a, b)
	}
	base := scanString(t, 4, words("w", 0, 12))
	if len(base.hashes) != 3 {
		t.Fatalf("12 words in blocks of 4 gave %d hashes", len(base.hashes))
	}
	// A shared prefix of 8 words shares two blocks, then diverges.
	fork := scanString(t, 4, words("w", 0, 8)+" other words here now")
	if !slices.Equal(fork.hashes[:2], base.hashes[:2]) || fork.hashes[2] == base.hashes[2] {
		t.Errorf("prefix sharing wrong: %x vs %x", fork.hashes, base.hashes)
	}
	// A different first word changes every block, later words equal or not.
	head := scanString(t, 4, "changed "+words("w", 1, 11))
	for i := range head.hashes {
		if head.hashes[i] == base.hashes[i] {
			t.Errorf("block %d shared although the first block differs", i)
		}
	}
	// A partial last block is not hashed.
	if got := len(scanString(t, 4, words("w", 0, 7)).hashes); got != 1 {
		t.Errorf("7 words gave %d hashes, want 1", got)
	}
}

func TestContentForms(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    int
		wantErr bool
	}{
		// A plain string.
		{"string", `"a b c"`, 3, false},
		// Text parts count, other parts do not, and parts do not glue words together.
		{"parts", `[{"type":"text","text":"a b"},{"type":"image_url","image_url":{}},{"type":"text","text":"c"}]`, 3, false},
		// A null content (an assistant tool call) counts nothing.
		{"null", `null`, 0, false},
		// A number is not a content.
		{"number", `42`, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPromptScan(4, 0)
			err := p.addContent(json.RawMessage(tc.content))
			p.finish()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && p.words != tc.want {
				t.Errorf("words = %d, want %d", p.words, tc.want)
			}
		})
	}
}

func FuzzPromptScanMatchesFields(f *testing.F) {
	for _, s := range []string{"a b", " x\ty\n", "é\u00a0ü", "<tag> & \"q\"", "\x00\x01 z", "a\u2028b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := json.Marshal(s)
		if err != nil {
			t.Skip()
		}
		var decoded string
		if err := json.Unmarshal(raw, &decoded); err != nil {
			t.Skip()
		}
		if got, want := scanRaw(t, 2, string(raw)).words, len(strings.Fields(decoded)); got != want {
			t.Errorf("words(%q) = %d, strings.Fields gives %d", s, got, want)
		}
	})
}

func BenchmarkPromptScan(b *testing.B) {
	// A 200K-word prompt, about 1.5 MB of JSON.
	raw, _ := json.Marshal(words("token", 0, 200_000))
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		p := newPromptScan(16, len(raw))
		if err := p.addJSONString(raw); err != nil {
			b.Fatal(err)
		}
		p.finish()
	}
}
