package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Terms are the parts of the engine model that headroom's own engine does
// not need but a calibration from another engine may: each is off at its
// zero value, so a profile without them behaves as before. docs/simulator.md
// ("Terms for other engines") gives the evidence for each.
type Terms struct {
	// RequestSeconds is a fixed cost per request: once admitted (holding its
	// sequence slot and KV blocks) a request waits this long before its
	// prompt is computed, while the other requests' iterations go on. It
	// stands for per-request work that does not share the batch (an engine
	// that times each request on its own, as llm-d-inference-sim does).
	RequestSeconds float64 `json:"request_seconds,omitempty"`
	// RequestSecondsPerPromptToken adds to that wait per prompt token not
	// served from the prefix cache: a prefill that runs beside the batch,
	// not in it.
	RequestSecondsPerPromptToken float64 `json:"request_seconds_per_prompt_token,omitempty"`
	// LoadSlowdown stretches every iteration and every request's wait by
	// 1 + LoadSlowdown x (running - 1) / (max_num_seqs - 1): 0 leaves them
	// alone; 2 makes a full engine three times slower than one request.
	LoadSlowdown float64 `json:"load_slowdown,omitempty"`
	// AnswerFractions is the distribution of an answer's length as a share
	// of the max_tokens it was allowed (see Quantiles). Zero: every
	// vocabulary answer runs to max_tokens. A shorter answer ends with
	// finish reason stop. Tool calls and read-back answers keep their own
	// length.
	AnswerFractions Quantiles `json:"answer_fractions,omitzero"`
	// TTFTFromAdmission makes the engine's TTFT series count from when the
	// request was admitted, leaving its time in the queue out (the client's
	// TTFT still holds it).
	TTFTFromAdmission bool `json:"ttft_from_admission,omitempty"`
	// NoPrefixCaching turns the prefix cache off (vLLM's
	// --no-enable-prefix-caching): every prompt token is computed.
	NoPrefixCaching bool `json:"no_prefix_caching,omitempty"`
}

func (t Terms) validate(name string) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"request_seconds", t.RequestSeconds}, {"request_seconds_per_prompt_token", t.RequestSecondsPerPromptToken}, {"load_slowdown", t.LoadSlowdown}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("sim profile %q: %s is %g: it must be zero or positive", name, f.name, f.v)
		}
	}
	if t.AnswerFractions == (Quantiles{}) {
		return nil
	}
	for i, v := range t.AnswerFractions {
		if !(v > 0 && v <= 1) {
			return fmt.Errorf("sim profile %q: answer_fractions[%d] is %g: each must be a share of max_tokens in (0, 1]", name, i, v)
		}
		if i > 0 && v < t.AnswerFractions[i-1] {
			return fmt.Errorf("sim profile %q: answer_fractions[%d] is %g, below the one before (%g): quantiles go up", name, i, v, t.AnswerFractions[i-1])
		}
	}
	return nil
}

// loadFactor is how much slower the engine runs with running requests in it.
func (p Profile) loadFactor(running int) float64 {
	if p.LoadSlowdown == 0 || p.MaxNumSeqs <= 1 || running <= 1 {
		return 1
	}
	return 1 + p.LoadSlowdown*float64(min(running, p.MaxNumSeqs)-1)/float64(p.MaxNumSeqs-1)
}

// requestDelay is how long a request admitted beside running others waits
// before its prompt is computed, for uncached prompt tokens.
func (p Profile) requestDelay(uncached, running int) time.Duration {
	s := p.RequestSeconds + p.RequestSecondsPerPromptToken*float64(uncached)
	if s <= 0 {
		return 0
	}
	return time.Duration(s * p.loadFactor(running) * float64(time.Second))
}

// answerTokens is the length of a vocabulary answer allowed maxTokens, for
// u uniform in [0, 1): the AnswerFractions quantile at u, interpolated.
func (p Profile) answerTokens(maxTokens int, u float64) int {
	q := p.AnswerFractions
	if q == (Quantiles{}) || maxTokens <= 1 {
		return maxTokens
	}
	return max(1, min(maxTokens, int(math.Round(q.At(u)*float64(maxTokens)))))
}

// Quantiles are a distribution as its 0th, 5th, ..., 100th percentiles. A
// file may give any number of at least two equally spaced quantiles (the
// first the 0th percentile, the last the 100th); they are interpolated to
// these.
type Quantiles [21]float64

// At is the distribution's quantile at u in [0, 1], interpolated.
func (q Quantiles) At(u float64) float64 { return interpolate(q[:], u) }

// QuantilesOf interpolates equally spaced quantiles to Quantiles.
func QuantilesOf(vs []float64) Quantiles {
	var q Quantiles
	for i := range q {
		q[i] = interpolate(vs, float64(i)/float64(len(q)-1))
	}
	return q
}

func interpolate(vs []float64, u float64) float64 {
	pos := max(0, min(1, u)) * float64(len(vs)-1)
	i := min(int(pos), len(vs)-2)
	return vs[i] + (vs[i+1]-vs[i])*(pos-float64(i))
}

// UnmarshalJSON reads a list of at least two equally spaced quantiles.
func (q *Quantiles) UnmarshalJSON(b []byte) error {
	var vs []float64
	if err := json.Unmarshal(b, &vs); err != nil {
		return err
	}
	switch len(vs) {
	case 0:
		*q = Quantiles{}
		return nil
	case 1:
		return errors.New("answer_fractions has one value: give at least two equally spaced quantiles (the 0th and the 100th percentile), or none")
	}
	*q = QuantilesOf(vs)
	return nil
}

// unitOf maps a hash to [0, 1).
func unitOf(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// WithArgs is the profile with the engine arguments it models taken from a
// recipe's args: --max-num-seqs (SGLang: --max-running-requests),
// --max-num-batched-tokens (--chunked-prefill-size) and
// --no-enable-prefix-caching. Other arguments are left to the recipe; the
// second result names the fields the args set.
func (p Profile) WithArgs(args []string) (Profile, []string, error) {
	var set []string
	for _, a := range []struct {
		field string
		dst   *int
		flags []string
	}{
		{"max_num_seqs", &p.MaxNumSeqs, []string{"--max-num-seqs", "--max-running-requests"}},
		{"max_batched_tokens", &p.MaxBatchedTokens, []string{"--max-num-batched-tokens", "--chunked-prefill-size"}},
	} {
		v, flag, found, err := IntArg(args, a.flags...)
		if err != nil {
			return p, set, err
		}
		if found {
			*a.dst = v
			set = append(set, a.field+" (recipe args "+flag+")")
		}
	}
	if slices.Contains(args, "--no-enable-prefix-caching") {
		p.NoPrefixCaching = true
		set = append(set, "no_prefix_caching (recipe args --no-enable-prefix-caching)")
	}
	return p, set, p.Validate()
}

// IntArg finds the first of flags in args, as "--flag N" or "--flag=N";
// found is false when none is there, and a value that is not a positive
// integer is an error.
func IntArg(args []string, flags ...string) (v int, flag string, found bool, err error) {
	for i, a := range args {
		for _, fl := range flags {
			s := ""
			switch {
			case a == fl && i+1 < len(args):
				s = args[i+1]
			case strings.HasPrefix(a, fl+"="):
				s = strings.TrimPrefix(a, fl+"=")
			default:
				continue
			}
			n, perr := strconv.Atoi(s)
			if perr != nil || n <= 0 {
				return 0, fl, false, fmt.Errorf("recipe.args: %s %q: give a positive whole number", fl, s)
			}
			return n, fl, true, nil
		}
	}
	return 0, "", false, nil
}

// nextReady is the earliest end of a running request's wait after start.
func (e *engine) nextReady(start time.Duration) (time.Duration, bool) {
	at, ok := time.Duration(0), false
	for _, r := range e.running {
		if r.readyAt > start && (!ok || r.readyAt < at) {
			at, ok = r.readyAt, true
		}
	}
	return at, ok
}

// answerSalt parts an answer's length draw from the other draws a prompt's
// seed makes.
const answerSalt = 0x5a17_a115_0f_1e57
