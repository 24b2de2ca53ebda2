package prompt

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// byteTokens is a stand-in tokenizer: a BOS token plus one token per two
// bytes, rounded up, so a word and its space make two or more tokens.
func byteTokens(text []byte) (int, error) { return 1 + (len(text)+1)/2, nil }

// wordTokens counts words, as the built-in simulator does.
func wordTokens(text []byte) (int, error) { return len(bytes.Fields(text)), nil }

func TestCalibrate(t *testing.T) {
	b := Builder{Seed: 3}
	cases := []struct {
		name      string
		tokenize  func([]byte) (int, error)
		estimated bool
		exact     float64 // the factor wanted, or 0 to check it against the tokenizer
		err       string
	}{
		// The simulator counts words: its factor is exactly 1.
		{"words", wordTokens, false, 1, ""},
		// A tokenizer that makes about 2.7 tokens a word is measured so that
		// built prompts land on the planned count.
		{"bytes", byteTokens, false, 0, ""},
		// No tokenize endpoint: the documented estimate.
		{"no endpoint", func([]byte) (int, error) { return 0, fmt.Errorf("POST /tokenize: 404: %w", ErrNoTokenizer) }, true, EstimatedTokensPerWord, ""},
		{"nil", nil, true, EstimatedTokensPerWord, ""},
		// Any other failure is an error naming it.
		{"broken", func([]byte) (int, error) { return 0, errors.New("connection reset") }, false, 0, "connection reset"},
		// Counts that do not grow with the text are not believed.
		{"constant", func([]byte) (int, error) { return 7, nil }, false, 0, "do not grow"},
	}
	for _, c := range cases {
		cal, err := Calibrate(b, c.tokenize)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if cal.Estimated != c.estimated || (c.exact != 0 && cal.TokensPerWord != c.exact) {
			t.Errorf("%s: %+v, want estimated %v factor %v", c.name, cal, c.estimated, c.exact)
		}
		if c.exact == 0 {
			// the served count of calibrated prompts is the planned one, within
			// 1% and a few tokens for the longer marker words and the BOS
			b.TokensPerWord = cal.TokensPerWord
			for _, planned := range []int{2000, 20000, 150000} {
				p := b.Append(nil, "trace", 1, ids(1, planned/64+1), planned)
				served, _ := c.tokenize(p)
				if math.Abs(float64(served-planned)) > 0.01*float64(planned)+16 {
					t.Errorf("%s: factor %.3f: planned %d tokens, served %d", c.name, cal.TokensPerWord, planned, served)
				}
			}
			b.TokensPerWord = 0
		}
	}
}

func TestScaledPromptsStayCacheTrue(t *testing.T) {
	// With a factor, a prompt is round(tokens/factor) words, a block
	// round(64/factor), and a longer prompt over the same ids extends a
	// shorter one exactly.
	b := Builder{Seed: 9, TokensPerWord: 2.5}
	short := b.Append(nil, "t", 4, ids(1, 4), 200)
	long := b.Append(nil, "t", 4, ids(1, 8), 500)
	if got := len(words(t, short)); got != 80 {
		t.Errorf("200 tokens at 2.5 a word gave %d words, want 80", got)
	}
	if got := len(words(t, long)); got != 200 {
		t.Errorf("500 tokens at 2.5 a word gave %d words, want 200", got)
	}
	if !bytes.HasPrefix(long, short) {
		t.Errorf("the longer prompt does not extend the shorter one")
	}
	// A one-token prompt still has a word.
	if got := b.Append(nil, "t", 4, nil, 1); len(got) == 0 {
		t.Errorf("a 1-token prompt came out empty")
	}
}
