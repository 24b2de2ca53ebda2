package eval

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/headroom-bench/headroom/internal/stats"
	"gonum.org/v1/gonum/stat/distuv"
)

// ReportVersion is the version of the Report JSON written to the run
// directory.
const ReportVersion = 1

// Verdict is a suite's outcome under the confident-fail rule.
type Verdict string

// Verdicts. Only Fail blocks a recipe.
const (
	Pass         Verdict = "pass"         // the interval's lower bound is at or above the threshold
	Inconclusive Verdict = "inconclusive" // the interval holds the threshold: too few cases to say
	Fail         Verdict = "fail"         // the interval's upper bound is below the threshold: a confident fail
)

// Interval methods.
const (
	ClopperPearson = "clopper-pearson" // exact, conservative: the default
	Wilson         = "wilson"          // narrower, can undercover at rates near 0 or 1
)

// Interval returns the two-sided binomial interval for k successes in n
// trials at confidence (0 means 0.95), by method ("" means Clopper-Pearson).
// With n = 0 it is [0, 1].
func Interval(k, n int, confidence float64, method string) (lo, hi float64) {
	if !(confidence > 0 && confidence < 1) {
		confidence = 0.95
	}
	if n <= 0 {
		return 0, 1
	}
	k = max(0, min(k, n))
	if method == Wilson {
		return stats.Wilson(k, n, confidence)
	}
	alpha := 1 - confidence
	lo, hi = 0, 1
	if k > 0 {
		lo = distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(alpha / 2)
	}
	if k < n {
		hi = distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(1 - alpha/2)
	}
	return lo, hi
}

// Decide applies the confident-fail rule to a pass-rate interval: fail only
// when the whole interval lies below the threshold, pass when it lies at or
// above it, inconclusive when it holds the threshold.
func Decide(lo, hi, threshold float64) Verdict {
	switch {
	case hi < threshold:
		return Fail
	case lo >= threshold:
		return Pass
	}
	return Inconclusive
}

// DefaultThreshold is the pass rate a suite must be able to reach.
const DefaultThreshold = 0.9

// Options say how to run and judge suites.
type Options struct {
	Concurrency  int                // requests in flight; 0 or 1 sends one at a time (the pre-sweep smoke test)
	Seed         uint64             // for the built-in suites' cases
	Confidence   float64            // of each interval; 0 means 0.95
	Method       string             // ClopperPearson (default) or Wilson
	Threshold    float64            // pass-rate threshold of every suite; 0 means DefaultThreshold
	Thresholds   map[string]float64 // per suite name, overriding Threshold
	KeepFailures int                // failures kept per suite in the report; 0 means 5
	// OnResult, when set, sees every case result as it comes (calls are
	// serialised), e.g. for progress on a terminal.
	OnResult func(CaseResult)
}

func (o Options) threshold(suite string) float64 {
	if t, ok := o.Thresholds[suite]; ok {
		return t
	}
	if o.Threshold > 0 {
		return o.Threshold
	}
	return DefaultThreshold
}

// SuiteResult is one suite's outcome: counts, the pass rate with its
// interval, the verdict, and the first few failures with their reasons.
type SuiteResult struct {
	Suite      string         `json:"suite"`
	Cases      int            `json:"cases"`      // cases judged
	Passed     int            `json:"passed"`     // of those, passed
	Unanswered int            `json:"unanswered"` // of the failures, requests with no usable answer (refused, timeout, ...)
	Unsent     int            `json:"unsent,omitempty"`
	Rate       stats.Summary  `json:"rate"` // pass rate and its interval
	Method     string         `json:"method"`
	Threshold  float64        `json:"threshold"`
	Verdict    Verdict        `json:"verdict"`
	Classes    map[string]int `json:"classes,omitempty"`  // failures by class
	Failures   []CaseResult   `json:"failures,omitempty"` // the first few
}

// Report is the outcome of an eval run.
type Report struct {
	V        int           `json:"v"`
	Verdict  Verdict       `json:"verdict"` // fail when any suite fails, else inconclusive when any is, else pass
	Suites   []SuiteResult `json:"suites"`
	Warnings []string      `json:"warnings,omitempty"`
}

// Blocked reports whether the evals block the recipe: some suite failed
// confidently.
func (r Report) Blocked() bool { return r.Verdict == Fail }

// Summarise judges a suite from its case results under the confident-fail
// rule. results must hold only cases that were sent.
func Summarise(suite string, results []CaseResult, threshold float64, o Options) SuiteResult {
	keep := o.KeepFailures
	if keep <= 0 {
		keep = 5
	}
	method := o.Method
	if method != Wilson {
		method = ClopperPearson
	}
	conf := o.Confidence
	if !(conf > 0 && conf < 1) {
		conf = 0.95
	}
	s := SuiteResult{Suite: suite, Cases: len(results), Method: method, Threshold: threshold}
	for _, r := range results {
		if r.Pass {
			s.Passed++
			continue
		}
		if s.Classes == nil {
			s.Classes = map[string]int{}
		}
		s.Classes[r.Class]++
		if !r.Answered {
			s.Unanswered++
		}
		if len(s.Failures) < keep {
			s.Failures = append(s.Failures, r)
		}
	}
	lo, hi := Interval(s.Passed, s.Cases, conf, method)
	s.Rate = stats.Summary{Center: math.NaN(), Lo: lo, Hi: hi, Confidence: conf}
	if s.Cases > 0 {
		s.Rate.Center = float64(s.Passed) / float64(s.Cases)
	} else {
		s.Rate.Warnings = append(s.Rate.Warnings, "no case was judged")
	}
	if s.Unanswered > 0 {
		s.Rate.Warnings = append(s.Rate.Warnings, fmt.Sprintf("%d of %d cases got no usable answer; they count as failures", s.Unanswered, s.Cases))
	}
	s.Verdict = Decide(lo, hi, threshold)
	return s
}

// Run sends every case of every suite through c, at most o.Concurrency at a
// time, and judges each suite. When ctx ends early, the cases not sent (and
// those cut off by the cancellation) are counted as unsent, not as failures,
// and the report says so.
func Run(ctx context.Context, c Completer, suites []Suite, o Options) Report {
	type job struct {
		suite int
		c     Case
	}
	var jobs []job
	for i, s := range suites {
		for _, cs := range s.Cases(o.Seed) {
			if cs.Suite == "" {
				cs.Suite = s.Name()
			}
			jobs = append(jobs, job{i, cs})
		}
	}
	results := make([][]CaseResult, len(suites))
	unsent := make([]int, len(suites))
	var mu sync.Mutex
	// tally keeps a case's result, or counts it unsent when the
	// cancellation cut it off before an answer.
	tally := func(j job, r CaseResult) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil && !r.Answered {
			unsent[j.suite]++
			return
		}
		results[j.suite] = append(results[j.suite], r)
		if o.OnResult != nil {
			o.OnResult(r)
		}
	}
	if o.Concurrency <= 1 {
		// One at a time, in the caller's goroutine (a virtual clock's run
		// may start no goroutine on it); a client that can writes each
		// case's request while the case before it is answered.
		ac, _ := c.(aheadCompleter)
		var next *Ahead
		if ac != nil && len(jobs) > 0 {
			next = ac.Ahead(jobs[0].c.Request)
		}
		for k, j := range jobs {
			if ctx.Err() != nil {
				next.Discard()
				for _, rest := range jobs[k:] {
					unsent[rest.suite]++
				}
				break
			}
			if ac == nil {
				tally(j, RunCase(ctx, c, j.c))
				continue
			}
			cur := next
			next = nil
			if k+1 < len(jobs) {
				next = ac.Ahead(jobs[k+1].c.Request)
			}
			a, err := ac.CompleteAhead(ctx, j.c.Request, cur)
			tally(j, Judge(j.c, a, err))
		}
	} else {
		next := make(chan job)
		var wg sync.WaitGroup
		for range max(1, o.Concurrency) {
			wg.Go(func() {
				for j := range next {
					tally(j, RunCase(ctx, c, j.c))
				}
			})
		}
		sent := 0
	feed:
		for _, j := range jobs {
			select {
			case next <- j:
				sent++
			case <-ctx.Done():
				break feed
			}
		}
		close(next)
		wg.Wait()
		for _, j := range jobs[sent:] {
			unsent[j.suite]++
		}
	}

	rep := Report{V: ReportVersion, Verdict: Pass}
	for i, s := range suites {
		// Workers finish out of order; report failures in case order.
		sort.SliceStable(results[i], func(a, b int) bool { return results[i][a].Case < results[i][b].Case })
		sr := Summarise(s.Name(), results[i], o.threshold(s.Name()), o)
		sr.Unsent = unsent[i]
		if sr.Unsent > 0 {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: %d cases were not sent because the run was cancelled", s.Name(), sr.Unsent))
		}
		rep.Suites = append(rep.Suites, sr)
		rep.Verdict = worse(rep.Verdict, sr.Verdict)
	}
	if len(suites) == 0 {
		rep.Verdict = Inconclusive
		rep.Warnings = append(rep.Warnings, "no suites to run")
	}
	return rep
}

func worse(a, b Verdict) Verdict {
	rank := map[Verdict]int{Pass: 0, Inconclusive: 1, Fail: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// WriteText writes the report as a table with the first failures of each
// suite under it.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "suite\tcases\tpassed\trate\tinterval\tthreshold\tverdict")
	for _, s := range r.Suites {
		rate := "-"
		if s.Cases > 0 {
			rate = fmt.Sprintf("%.3f", s.Rate.Center)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t[%.3f, %.3f] @%g%% %s\t%.2f\t%s\n", s.Suite, s.Cases, s.Passed, rate, s.Rate.Lo, s.Rate.Hi, 100*s.Rate.Confidence, s.Method, s.Threshold, s.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	for _, s := range r.Suites {
		for _, f := range s.Failures {
			fmt.Fprintf(&b, "  %s %s: %s: %s\n", s.Suite, f.Case, f.Class, f.Reason)
		}
		if more := s.Cases - s.Passed - len(s.Failures); more > 0 {
			fmt.Fprintf(&b, "  %s: %d more failures\n", s.Suite, more)
		}
	}
	for _, m := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", m)
	}
	fmt.Fprintf(&b, "evals: %s\n", r.Verdict)
	_, err := io.WriteString(w, b.String())
	return err
}

// BuiltIn returns the built-in suites for a recipe whose context length is
// contextLen tokens: tool calling, and long-context read-back when
// contextLen leaves room for it (contextLen <= 0 leaves it out).
func BuiltIn(contextLen int) []Suite {
	out := []Suite{ToolSuite{}}
	if rb := (ReadBackSuite{ContextLen: contextLen}); contextLen > 0 && len(rb.Lengths()) > 0 {
		out = append(out, rb)
	}
	return out
}
