package eval

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Mixer hands out eval cases during the sweep: Take says whether the next
// request should be an eval request, so that a set share of requests are;
// Next gives the case to send. It is safe for concurrent use.
type Mixer struct {
	share float64
	cases []Case
	taken atomic.Uint64 // calls to Take
	next  atomic.Uint64 // cases handed out
}

// NewMixer returns a mixer that makes share (0 < share <= 1) of requests
// eval requests, cycling through the cases of suites drawn with seed.
func NewMixer(share float64, seed uint64, suites ...Suite) (*Mixer, error) {
	if !(share > 0 && share <= 1) {
		return nil, fmt.Errorf("eval share under load is %g: give a fraction in (0, 1], e.g. 0.05", share)
	}
	m := &Mixer{share: share}
	for _, s := range suites {
		for _, c := range s.Cases(seed) {
			if c.Suite == "" {
				c.Suite = s.Name()
			}
			m.cases = append(m.cases, c)
		}
	}
	if len(m.cases) == 0 {
		return nil, errors.New("no eval cases to mix in: give at least one suite with cases")
	}
	return m, nil
}

// Share is the fraction of requests that are eval requests.
func (m *Mixer) Share() float64 { return m.share }

// Take reports whether the caller's next request should be an eval request.
// Over any run of calls, the eval requests are share of them to within one:
// the i-th call says yes when floor(i*share) steps up.
func (m *Mixer) Take() bool {
	i := m.taken.Add(1)
	return math.Floor(float64(i)*m.share) > math.Floor(float64(i-1)*m.share)
}

// Next returns the next eval case, cycling through all of them in order.
func (m *Mixer) Next() Case {
	i := m.next.Add(1) - 1
	return m.cases[i%uint64(len(m.cases))]
}

// Tally counts eval results per step during the sweep. It is safe for
// concurrent use.
type Tally struct {
	mu    sync.Mutex
	keep  int
	steps map[int]*StepTally
}

// NewTally returns an empty tally that keeps the first five failures of
// each step.
func NewTally() *Tally { return &Tally{keep: 5, steps: map[int]*StepTally{}} }

// StepTally is what the eval requests of one step showed.
type StepTally struct {
	Step     int `json:"step"`
	Sent     int `json:"sent"`     // eval requests whose result came back
	Answered int `json:"answered"` // of those, with a usable answer
	Passed   int `json:"passed"`   // answers that passed their check
	// ToolAnswered counts answered cases that expected a tool call, and
	// Mismatched those of them whose tool calls did not match their schema
	// (see Malformed): the under-load bar part.
	ToolAnswered int            `json:"tool_answered"`
	Mismatched   int            `json:"mismatched"`
	Classes      map[string]int `json:"classes,omitempty"`  // failures by class, unanswered requests included
	Failures     []CaseResult   `json:"failures,omitempty"` // the first few
}

// Add records one eval result in a step.
func (t *Tally) Add(step int, r CaseResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.steps[step]
	if s == nil {
		s = &StepTally{Step: step}
		t.steps[step] = s
	}
	s.Sent++
	if r.Answered {
		s.Answered++
		if r.ToolCase {
			s.ToolAnswered++
			if Malformed(r.Class) {
				s.Mismatched++
			}
		}
	}
	if r.Pass {
		s.Passed++
		return
	}
	if s.Classes == nil {
		s.Classes = map[string]int{}
	}
	s.Classes[r.Class]++
	if len(s.Failures) < t.keep {
		s.Failures = append(s.Failures, r)
	}
}

// Step returns a copy of one step's tally (empty when nothing was added).
func (t *Tally) Step(step int) StepTally {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.steps[step]
	if s == nil {
		return StepTally{Step: step}
	}
	return s.clone()
}

// Steps returns a copy of every step's tally, in step order.
func (t *Tally) Steps() []StepTally {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]StepTally, 0, len(t.steps))
	for _, s := range t.steps {
		out = append(out, s.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out
}

func (s *StepTally) clone() StepTally {
	c := *s
	if s.Classes != nil {
		c.Classes = make(map[string]int, len(s.Classes))
		for k, v := range s.Classes {
			c.Classes[k] = v
		}
	}
	c.Failures = append([]CaseResult(nil), s.Failures...)
	return c
}

// PartToolCalls is the name of the bar part for tool calls under load.
const PartToolCalls = "tool_calls"

// Part judges the step's tool calls as a bar part: the share of answered
// tool-call eval requests whose calls did not match their schema, with a
// Clopper-Pearson interval at confidence (0 means 0.95), against maxShare
// (the most that may mismatch, e.g. 0.02). Like every eval it blocks only
// on a confident fail: fail when the interval's lower bound is above
// maxShare; no data when no tool-call eval was answered in the step (a
// missing measurement never passes); pass otherwise, with a warning when
// the interval still reaches past maxShare.
func (s StepTally) Part(maxShare, confidence float64) verdict.Part {
	if !(confidence > 0 && confidence < 1) {
		confidence = 0.95
	}
	p := verdict.Part{
		Name:   PartToolCalls,
		Bar:    maxShare,
		Source: "eval requests under load (client-side schema check)",
		Value:  stats.Summary{Center: math.NaN(), Lo: 0, Hi: 1, Confidence: confidence},
	}
	if s.ToolAnswered == 0 {
		p.Verdict = verdict.NoData
		p.Margin = math.NaN()
		p.Missing = []string{"eval_tool_calls"}
		p.Value.Warnings = append(p.Value.Warnings, fmt.Sprintf("no tool-call eval request was answered in step %d (%d sent): raise the eval share or the step length", s.Step, s.Sent))
		return p
	}
	lo, hi := Interval(s.Mismatched, s.ToolAnswered, confidence, ClopperPearson)
	p.Value.Center = float64(s.Mismatched) / float64(s.ToolAnswered)
	p.Value.Lo, p.Value.Hi = lo, hi
	p.Margin = maxShare - p.Value.Center
	switch {
	case lo > maxShare:
		p.Verdict = verdict.Fail
	default:
		p.Verdict = verdict.Pass
		if hi > maxShare {
			p.Value.Warnings = append(p.Value.Warnings, fmt.Sprintf("inconclusive: %d of %d tool calls mismatched and the interval reaches %.1f%%, past the %.1f%% allowed; evals block only on a confident fail", s.Mismatched, s.ToolAnswered, 100*hi, 100*maxShare))
		}
	}
	return p
}
