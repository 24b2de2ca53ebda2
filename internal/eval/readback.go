package eval

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// The read-back phrasing. A simulator that wants to answer read-back cases
// finds FactLead in the prompt and returns the word after it; the question
// at the end of the prompt starts with QuestionLead.
const (
	FactLead     = "The secret code word is "
	QuestionLead = "What is the secret code word"
)

// ReadBackSuite is the built-in long-context suite: a code word planted at
// several depths of filler text, at several prompt lengths up to the
// recipe's context length, then asked back. A case passes when the answer
// holds the code word verbatim. Lengths are counted as whitespace-separated
// words, headroom's stand-in for tokens.
type ReadBackSuite struct {
	// ContextLen is the recipe's context length in tokens.
	ContextLen int
	// Depths are where the fact sits, as fractions of the filler (default
	// 0.1, 0.5, 0.9).
	Depths []float64
	// Fractions are the prompt lengths as fractions of the usable context
	// (default 0.25, 0.5, 1).
	Fractions []float64
	// Margin is the share of ContextLen kept free for the chat template and
	// for tokenizers that cut words into several tokens (default 0.1).
	Margin float64
	// MaxTokens is the cap per request (default 32).
	MaxTokens int
	// Repeats runs every length and depth this many times with different
	// code words and filler (default 4: 36 cases with the default lengths and
	// depths, the fewest with which a perfect run can pass a 0.9 threshold
	// under Clopper-Pearson at 95%).
	Repeats int
}

// Name implements Suite.
func (ReadBackSuite) Name() string { return "long_context_readback" }

// minReadBackWords is the shortest prompt worth a read-back case.
const minReadBackWords = 64

// Lengths returns the prompt lengths, in words, the suite will send.
func (s ReadBackSuite) Lengths() []int {
	margin := s.Margin
	if margin <= 0 || margin >= 1 {
		margin = 0.1
	}
	usable := int(float64(s.ContextLen)*(1-margin)) - s.maxTokens()
	fracs := s.Fractions
	if len(fracs) == 0 {
		fracs = []float64{0.25, 0.5, 1}
	}
	var out []int
	for _, f := range fracs {
		if n := int(f * float64(usable)); n >= minReadBackWords && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func (s ReadBackSuite) maxTokens() int {
	if s.MaxTokens <= 0 {
		return 32
	}
	return s.MaxTokens
}

// Cases implements Suite: one case per repeat, length and depth, each with
// its own code word and filler drawn from seed.
func (s ReadBackSuite) Cases(seed uint64) []Case {
	depths := s.Depths
	if len(depths) == 0 {
		depths = []float64{0.1, 0.5, 0.9}
	}
	reps := s.Repeats
	if reps <= 0 {
		reps = 4
	}
	r := rand.New(rand.NewPCG(seed, 0x4eadbac4))
	var out []Case
	for rep := range reps {
		for _, n := range s.Lengths() {
			for _, d := range depths {
				code := codeWord(r)
				id := fmt.Sprintf("readback-%dw-d%02.0f", n, 100*d)
				if reps > 1 {
					id = fmt.Sprintf("readback-%dw-d%02.0f-r%d", n, 100*d, rep)
				}
				out = append(out, Case{
					ID:    id,
					Suite: s.Name(),
					Request: Request{
						Messages:  []Message{{Role: "user", Content: readBackPrompt(r, n, d, code)}},
						MaxTokens: s.maxTokens(),
					},
					Check: ContainsCheck{Want: code},
				})
			}
		}
	}
	return out
}

var (
	codeA = []string{"amber", "cobalt", "crimson", "jade", "onyx", "saffron", "teal", "violet"}
	codeB = []string{"falcon", "lantern", "meadow", "harbor", "glacier", "orchard", "comet", "willow"}
)

// codeWord draws a code word such as "jade-harbor-4821": one token-ish
// word that filler text never contains.
func codeWord(r *rand.Rand) string {
	return fmt.Sprintf("%s-%s-%04d", pick(r, codeA), pick(r, codeB), r.IntN(10000))
}

// fillParts are the parts of a filler sentence, each a list of phrases
// already cut into words: plain words, no digits, none of the code words'
// parts.
var fillParts = [][][]string{
	phrases("The build", "A reviewer", "The service", "Our team", "The scheduler", "A worker", "The parser", "The cache"),
	phrases("checked", "moved", "logged", "rebuilt", "skipped", "merged", "traced", "renamed"),
	phrases("the old config", "a small patch", "every open ticket", "the nightly report", "the queue depth", "a stale branch", "the test suite", "the slow query"),
	phrases("before lunch", "after the release", "without any trouble", "late on a quiet day", "as planned", "once again", "for the second time", "in the staging area"),
}

func phrases(ps ...string) [][]string {
	out := make([][]string, len(ps))
	for i, p := range ps {
		out[i] = strings.Fields(p)
	}
	return out
}

// readBackPrompt builds a prompt of exactly n words: filler with the fact
// planted at depth d (a fraction of the filler), then the question.
func readBackPrompt(r *rand.Rand, n int, d float64, code string) string {
	fact := FactLead + code + ". Remember it."
	question := QuestionLead + " stated in the text above? Reply with the code word only."
	fillerWords := n - wordCount(fact) - wordCount(question)
	at := int(d * float64(fillerWords))
	var b strings.Builder
	b.Grow(n * 8)
	written, planted := 0, false
	var sentence []string
	for written < fillerWords {
		if !planted && written >= at {
			b.WriteString(fact)
			b.WriteByte(' ')
			planted = true
		}
		sentence = sentence[:0]
		for _, part := range fillParts {
			sentence = append(sentence, pick(r, part)...)
		}
		sentence[len(sentence)-1] += "."
		if left := fillerWords - written; len(sentence) > left {
			sentence = sentence[:left]
		}
		for _, w := range sentence {
			b.WriteString(w)
			b.WriteByte(' ')
		}
		written += len(sentence)
	}
	if !planted {
		b.WriteString(fact)
		b.WriteByte(' ')
	}
	b.WriteString("\n\n")
	b.WriteString(question)
	return b.String()
}

func wordCount(s string) int { return len(strings.Fields(s)) }
