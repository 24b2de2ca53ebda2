package sweep

import (
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// The server's TTFT count is checked against the first tokens the client
// saw, window by window: a server that counts a third of them (a proxy
// scaling its counters by whole numbers, which the fraction check cannot
// see) or several times more makes its windows no data, never a pass.
func TestFirstTokensCrossCheckTTFT(t *testing.T) {
	p := judgedPlan()
	cases := []struct {
		name  string
		ratio float64 // server observations per first token the client saw
		want  verdict.Verdict
		warn  string
	}{
		{"as many", 1, verdict.Pass, ""},
		{"a quarter", 0.25, verdict.NoData, "fewer than half the"},
		{"five times", 5, verdict.NoData, "more than twice the"},
	}
	for _, c := range cases {
		samples := scrapes(gaugeRun(13, map[string]float64{running: 4, waiting: 0}))
		for i := range samples {
			h := samples[i].Hist["ttft_seconds"]
			for k := range h.Cumulative {
				h.Cumulative[k] *= c.ratio
			}
			h.Count *= c.ratio
			samples[i].Hist["ttft_seconds"] = h
		}
		step := JudgeStep(p, StepResult{Index: 0, Sessions: 4, RepeatOf: -1, End: 60}, samples, turns(60*time.Second))
		var ttft verdict.Verdict
		for _, part := range step.Judged.Parts {
			if part.Name == verdict.PartTTFT {
				ttft = part.Verdict
			}
		}
		all := strings.Join(step.Judged.Warnings, "\n")
		t.Logf("%s: ttft %s, step %s", c.name, ttft, step.Judged.Verdict)
		if ttft != c.want {
			t.Errorf("%s: ttft %s, want %s (warnings %q)", c.name, ttft, c.want, step.Judged.Warnings)
		}
		if c.warn != "" && !strings.Contains(all, c.warn) {
			t.Errorf("%s: no warning says %q: %q", c.name, c.warn, step.Judged.Warnings)
		}
		if c.warn == "" && strings.Contains(all, "cross-check: ttft_seconds") {
			t.Errorf("%s: the counts agree but a warning says otherwise: %q", c.name, step.Judged.Warnings)
		}
	}
}
