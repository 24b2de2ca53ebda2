package prompt

import (
	"errors"
	"fmt"
	"math"
)

// EstimatedTokensPerWord is the fallback for Builder.TokensPerWord when the
// server has no /tokenize. The placeholder words are 2 to 7 symbols (4.5 on
// average) drawn at random from a-z and 0-5; byte-pair vocabularies of
// current open models (Llama 3, Qwen, DeepSeek, GLM: 100-150K entries) hold
// few such random strings whole, so a word splits into about two tokens plus
// the odd third (a digit run, a rare letter pair). 2.5 is that estimate; it is
// not measured, so a run on it reports planned and served prompt tokens apart
// and their drift shows how far off it was.
const EstimatedTokensPerWord = 2.5

// ErrNoTokenizer is what a Tokenize func returns (wrapped) when the server
// has no tokenize endpoint; Calibrate then falls back to the estimate.
var ErrNoTokenizer = errors.New("the server has no tokenize endpoint")

// Calibration is the outcome of Calibrate.
type Calibration struct {
	TokensPerWord float64 `json:"tokens_per_word"` // to put in Builder.TokensPerWord
	Estimated     bool    `json:"estimated"`       // true when it is EstimatedTokensPerWord, not measured
	Samples       int     `json:"samples"`         // sample texts measured
	// Min and Max are the lowest and highest sample's tokens per word.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// calibrationWords is the length of the shorter text of each sample pair.
const calibrationWords = 512

// calibrationSamples is how many sample pairs Calibrate measures.
const calibrationSamples = 4

// Calibrate measures how many tokens the served model makes of one
// placeholder word. For each of a few samples it tokenizes a prompt of 512
// words and the same prompt grown to 1,024 words (b's seed and block size,
// block text throughout) and takes the difference over 512 words, which
// cancels whatever the endpoint adds per text (a BOS token, say). The factor
// is the mean over samples. tokenize counts the tokens of one text; when it
// returns ErrNoTokenizer (or is nil) Calibrate returns the estimate instead.
func Calibrate(b Builder, tokenize func(text []byte) (int, error)) (Calibration, error) {
	if tokenize == nil {
		return estimated(), nil
	}
	b.TokensPerWord = 0
	block := b.BlockSize
	if block <= 0 {
		block = DefaultBlockSize
	}
	ids := make([]int64, (2*calibrationWords+block-1)/block)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	c := Calibration{Samples: calibrationSamples, Min: math.Inf(1), Max: math.Inf(-1)}
	var buf []byte
	sum := 0.0
	for k := range calibrationSamples {
		id := fmt.Sprintf("calibration-%d", k)
		var counts [2]int
		for j, words := range []int{calibrationWords, 2 * calibrationWords} {
			buf = b.Append(buf[:0], id, 0, ids, words)
			n, err := tokenize(buf)
			if errors.Is(err, ErrNoTokenizer) {
				return estimated(), nil
			}
			if err != nil {
				return Calibration{}, fmt.Errorf("calibrating prompt tokens: %w", err)
			}
			counts[j] = n
		}
		f := float64(counts[1]-counts[0]) / calibrationWords
		if f <= 0 || math.IsNaN(f) {
			return Calibration{}, fmt.Errorf("calibrating prompt tokens: %d words counted %d tokens and %d words %d; the tokenize endpoint's counts do not grow with the text",
				calibrationWords, counts[0], 2*calibrationWords, counts[1])
		}
		sum += f
		c.Min, c.Max = min(c.Min, f), max(c.Max, f)
	}
	c.TokensPerWord = sum / calibrationSamples
	return c, nil
}

func estimated() Calibration {
	e := EstimatedTokensPerWord
	return Calibration{TokensPerWord: e, Estimated: true, Min: e, Max: e}
}
