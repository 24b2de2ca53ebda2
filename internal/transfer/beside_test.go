package transfer

import (
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/calibrate"
)

// TestBesideProfileDoesNotChunkPrompts: llm-d-inference-sim times each
// request's prompt on its own, so calibrate fits it beside the batch. The
// profile kept the default budget of 8192 tokens an iteration, and the
// simulator then spent an iteration, slowed by the load, on each 8192
// tokens of a 100K-token prompt: the recorded x30 run's P90 TTFT was
// predicted 47-75% high and its capacity a ladder step low. A profile
// fitted beside the batch takes a prompt in one iteration: its budget
// holds the longest prompt the run sent.
func TestBesideProfileDoesNotChunkPrompts(t *testing.T) {
	run, err := calibrate.Load("testdata/cases/c-f30")
	if err != nil {
		t.Fatal(err)
	}
	fit, err := calibrate.FitProfile([]calibrate.Run{run})
	if err != nil {
		t.Fatal(err)
	}
	longest := 0
	for _, r := range run.Records {
		longest = max(longest, r.ServedPromptTokens)
	}
	p := fit.Profile
	param, _ := fit.Param("max_batched_tokens")
	t.Logf("prefill %g tokens/s, max_batched_tokens %d (%s), longest prompt %d", p.PrefillTokensPerSecond, p.MaxBatchedTokens, param.Source, longest)
	if p.PrefillTokensPerSecond < 1e8 {
		t.Fatalf("prefill at %g tokens/s: want the fit beside the batch (prompt tokens cost the batch nothing)", p.PrefillTokensPerSecond)
	}
	if p.MaxBatchedTokens < longest || !strings.HasPrefix(param.Source, "fitted beside the batch") {
		t.Errorf("max_batched_tokens %d (%s): want it to hold the longest prompt, %d tokens, in one iteration", p.MaxBatchedTokens, param.Source, longest)
	}
}
