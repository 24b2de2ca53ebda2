package recommend

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
)

// smallSpace is a space of four candidates on the built-in default recipe,
// cut to 10-minute steps: the same engine at $1.80 and $1.85 per GPU-hour
// (the same capacity, so their cost intervals overlap), a 128K context
// that refuses a quarter of the turns (it cannot hold the target; its one
// step runs 10 minutes so the error interval clears the bar), and 2
// copies of 4 GPUs on a 16-GPU recipe (invalid: the GPUs do not add up).
// The error bar is 10%: a short step sends too few turns to tell 0
// errors from 2%, and latency is what the rest of the space compares.
// Steps of 3 minutes (3 windows of 4 sessions) no longer decide: since the
// intervals carry which sessions a run drew and the few blocks it had,
// 4 sessions read too close on interactivity there, and the candidates
// honestly need a GPU window.
const smallSpace = `version: 1
name: small
base: base.yaml
target: 6
resolution: 4
set:
  bar.error_rate: 0.1
  sweep.ladder: [4, 12]
  sweep.warmup_s: 180
  sweep.step_s: 600
  sweep.repeat: false
  sweep.stress: null
  workload.synth_sessions: 40
  evals.suites: []
  evals.under_load_share: 0
axes:
  - name: recipe
    options:
      - label: vllm-1.80
        set: {recipe.usd_per_gpu_hour: 1.80}
      - label: vllm-1.85
        set: {recipe.usd_per_gpu_hour: 1.85}
      - label: 128k
        set: {recipe.max_model_len: 131072, recipe.sim.profile: glm-16xrtx6000-128k, workload.max_over_context: 0.99, sweep.step_s: 600}
      - label: 2x4
        set: {recipe.copies: 2, recipe.sim.gpus_per_copy: 4}
`

func writeSpace(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "base.yaml"), config.DefaultYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "space.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The small space end to end: the two prices of one engine hold the
// target and rank cheapest first, too close to call with each other; the
// 128K context does not hold the target; the invalid layout is listed as
// skipped with the validation message. Every figure comes from a virtual
// run of the real rig.
func TestSearchSmallSpace(t *testing.T) {
	s, err := Load(writeSpace(t, smallSpace))
	if err != nil {
		t.Fatal(err)
	}
	s.Output = t.TempDir()
	var progress bytes.Buffer
	wall := time.Now()
	res, err := Search(context.Background(), s, Options{Workers: 2, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d candidates in %v\n%s\n%s", len(res.Candidates), time.Since(wall), progress.String(), res.Table())
	by := map[string]Ranked{}
	for _, c := range res.Candidates {
		by[c.Label] = c
	}
	cheap, dear, short, bad := by["recipe=vllm-1.80"], by["recipe=vllm-1.85"], by["recipe=128k"], by["recipe=2x4"]
	if cheap.Status != Holds || dear.Status != Holds {
		t.Fatalf("the default engine at 6 sessions: status %s and %s, want both %s", cheap.Status, dear.Status, Holds)
	}
	if cheap.Rank != 1 || dear.Rank != 2 {
		t.Errorf("ranks: $1.80 #%d, $1.85 #%d; want the cheaper first (#1, #2)", cheap.Rank, dear.Rank)
	}
	if res.Candidates[0].Label != cheap.Label || res.Candidates[1].Label != dear.Label {
		t.Errorf("order: %s, %s first; want the ranked candidates first, cheapest first", res.Candidates[0].Label, res.Candidates[1].Label)
	}
	if len(cheap.TooCloseWith) != 1 || cheap.TooCloseWith[0] != 2 || len(dear.TooCloseWith) != 1 || dear.TooCloseWith[0] != 1 {
		t.Errorf("too close: #1 with %v, #2 with %v; want each with the other (cost intervals %+v and %+v)", cheap.TooCloseWith, dear.TooCloseWith, *cheap.USDPerSessionHour, *dear.USDPerSessionHour)
	}
	if short.Status != DoesNotHold || !strings.Contains(short.Reason, "errors") {
		t.Errorf("128K context: status %s (%s), want %s, limited by errors", short.Status, short.Reason, DoesNotHold)
	}
	if bad.Status != Skipped || !strings.Contains(bad.Reason, "recipe.sim.gpus_per_copy") {
		t.Errorf("2 copies of 4 GPUs on 16: status %s (%s), want %s with the validation message", bad.Status, bad.Reason, Skipped)
	}
	for _, want := range []string{"candidate 1 of 4", "candidate 4 of 4 (recipe=2x4): skipped"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	table := res.Table()
	for _, want := range []string{"too close to call with #2", "does not hold the target", "skipped", "recipe.sim.gpus_per_copy"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	b, err := res.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || len(back.Candidates) != 4 {
		t.Errorf("JSON does not read back (%v): %s", err, b)
	}
	page := string(res.HTML())
	if !strings.Contains(page, "<!DOCTYPE html>") || strings.Contains(page, "<script") || strings.Contains(page, "http") {
		t.Errorf("the HTML page is not one self-contained page")
	}
}
