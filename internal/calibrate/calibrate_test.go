package calibrate

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/sim"
)

// hiddenProfile is an engine unlike the default one in every fitted
// field: a faster prefill and decode, and a KV cache of 400K tokens (the
// default's 1.37M) that a light-only ladder outgrows at about 8 sessions.
const hiddenProfile = `name: hidden
model: glm-5.3
max_model_len: 262144
block_size: 16
kv_capacity_tokens: 400000
max_num_seqs: 128
max_batched_tokens: 8192
prefill_tokens_per_second: 40000
prefill_attention_seconds_per_kv_token: 1.5e-10
decode_base_seconds: 0.015
decode_seconds_per_kv_token: 2.0e-8
`

// shortRun is a light-only ladder of short steps on the virtual clock that
// the hidden engine holds clearly until its KV cache runs out, then misses
// on TTFT.
func shortRun(t *testing.T, profile string) config.Run {
	t.Helper()
	cfg := config.Default()
	cfg.Recipe.Sim.Profile = profile
	cfg.TimeScale = config.Virtual
	cfg.Workload.SynthSessions = 40
	cfg.Workload.Mix = config.Mix{Light: 1}
	cfg.Evals.Suites, cfg.Evals.UnderLoadShare = nil, 0
	cfg.Bar.ErrorRate = 0.5 // steps this short judge errors on a few dozen turns
	s := &cfg.Sweep
	noRepeat := false
	s.Ladder, s.Target, s.Stress, s.Repeat = []int{2, 4, 6, 8, 10, 12, 14, 16}, 4, 0, &noRepeat
	s.WarmupS, s.StepS, s.WindowS, s.DrainS, s.Resamples = 45, 90, 15, 60, 200
	cfg.Workload.PrimeTimeoutS = 45
	cfg.Output = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runAt is the Runner the tests predict with: rig.Run on the clock scale
// (see SetClock).
func runAt(scale string) Runner {
	return func(ctx context.Context, cfg config.Run) (report.Summary, error) {
		if err := SetClock(&cfg, scale); err != nil {
			return report.Summary{}, err
		}
		return rig.Run(ctx, rig.Options{Config: cfg})
	}
}

// TestCalibrateRecoversAHiddenProfile runs a short ladder against the
// simulator with a profile the calibration is not told (the file is
// deleted before it starts), fits a profile to the run directory, and
// checks the fitted fields against the hidden ones and the capacity the
// fitted profile predicts against the one measured. The default profile
// predicts the same recipe far off, so the capacity check can fail. All
// on the virtual clock: the same verdicts on any host, in seconds.
func TestCalibrateRecoversAHiddenProfile(t *testing.T) {
	start := time.Now()
	dir := t.TempDir()
	hidden := filepath.Join(dir, "hidden.yaml")
	if err := os.WriteFile(hidden, []byte(hiddenProfile), 0o644); err != nil {
		t.Fatal(err)
	}
	truth, err := sim.LoadProfile(hidden)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	measured, err := rig.Run(ctx, rig.Options{Config: shortRun(t, hidden)})
	if err != nil && len(measured.Steps) == 0 {
		t.Fatalf("the measured run: %v", err)
	}
	if measured.Capacity.AtLeast || measured.Capacity.BelowFirst {
		t.Fatalf("the measured run has no crossing to recover: capacity %+v", measured.Capacity)
	}
	if err := os.Remove(hidden); err != nil {
		t.Fatal(err)
	}
	run, err := Load(measured.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	fit, err := FitProfile([]Run{run})
	if err != nil {
		t.Fatal(err)
	}
	got := fit.Profile
	// Tolerances: decode windows time the base and the context cost to a
	// few percent (this run: +0% and +0%), and the gauge the KV cache
	// (+0%). Prompt tokens are a small share of most iterations in this
	// light-only workload, so how their cost splits between tokens and
	// attention (+6%, +7%) is pinned down less well than their sum, the
	// time to compute an 8K chunk on a 50K context (-3%).
	chunk := func(p sim.Profile) float64 {
		return 8192/p.PrefillTokensPerSecond + p.PrefillAttentionSecondsPerKVToken*8192*(50000+8192/2)
	}
	checks := []struct {
		field     string
		got, want float64
		tol       float64
	}{
		{"prefill_tokens_per_second", got.PrefillTokensPerSecond, truth.PrefillTokensPerSecond, 0.15},
		{"prefill_attention_seconds_per_kv_token", got.PrefillAttentionSecondsPerKVToken, truth.PrefillAttentionSecondsPerKVToken, 0.3},
		{"seconds to compute an 8K chunk on 50K of context", chunk(got), chunk(truth), 0.1},
		{"decode_base_seconds", got.DecodeBaseSeconds, truth.DecodeBaseSeconds, 0.05},
		{"decode_seconds_per_kv_token", got.DecodeSecondsPerKVToken, truth.DecodeSecondsPerKVToken, 0.1},
		{"kv_capacity_tokens", float64(got.KVCapacityTokens), float64(truth.KVCapacityTokens), 0.05},
		{"block_size", float64(got.BlockSize), float64(truth.BlockSize), 0},
		{"max_model_len", float64(got.MaxModelLen), float64(truth.MaxModelLen), 0},
	}
	for _, c := range checks {
		t.Logf("%s: fitted %.4g, hidden %.4g (%+.0f%%)", c.field, c.got, c.want, 100*(c.got-c.want)/c.want)
		if math.Abs(c.got-c.want) > c.tol*c.want {
			t.Errorf("%s: fitted %.4g, hidden %.4g: off by more than %.0f%%", c.field, c.got, c.want, 100*c.tol)
		}
	}

	// Predict the run with the fitted profile and, as the control, with the
	// default profile the run was not made with.
	write := func(name string, f Fit) string {
		path := filepath.Join(dir, name)
		b, err := f.ProfileYAML([]string{run.Dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	predict := func(profile string) Comparison {
		cfg, err := PredictConfig(run, profile, fit.Personality, filepath.Join(dir, "predicted"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := Predict(ctx, run, cfg, runAt("virtual"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := predict(write("profile.yaml", fit))
	var text strings.Builder
	c.WriteText(&text)
	t.Logf("fitted profile:\n%s", text.String())
	switch {
	case math.IsNaN(c.CapacityError):
		// one of the runs passed no step (a marginal step read too close):
		// the measured capacity must then lie in the predicted interval
		if m, p := c.Measured, c.Predicted; m.NotEstablished || m.Sessions < p.Lo || m.Sessions > p.Hi {
			t.Errorf("capacity: measured %+v outside the predicted interval %.1f-%.1f (predicted established none)", m, p.Lo, p.Hi)
		}
	case math.Abs(c.CapacityError) > c.StepSize:
		t.Errorf("capacity: predicted %.1f, measured %.1f: more than one ladder step (%g) apart", c.Predicted.Sessions, c.Measured.Sessions, c.StepSize)
	}
	if len(c.Steps) == 0 || !strings.Contains(text.String(), "capacity: measured") {
		t.Errorf("the comparison has no steps or no capacity line:\n%s", text.String())
	}
	d := predict(write("default.yaml", Fit{Profile: sim.DefaultProfile(), Personality: "vllm"}))
	text.Reset()
	d.WriteText(&text)
	t.Logf("default profile:\n%s", text.String())
	if math.Abs(d.CapacityError) <= d.StepSize {
		t.Errorf("the default profile predicts capacity %.1f against the measured %.1f: the check above cannot tell a fit from no fit", d.Predicted.Sessions, d.Measured.Sessions)
	}
	t.Logf("wall %.1f s", time.Since(start).Seconds())
}

// TestStepWithin: a predicted P90 counts as within when it lies in the
// measured step's interval, ends included; a step without an interval on
// either side counts for neither.
func TestStepWithin(t *testing.T) {
	nan := math.NaN()
	s := StepComparison{PredictedTTFT: 4.26, MeasuredTTFTLo: 2.0, MeasuredTTFTHi: 3.1,
		PredictedInteractivity: 40, MeasuredInteractivityLo: 40, MeasuredInteractivityHi: 45}
	if ttft, inter, tk, ik := s.Within(); ttft || !inter || !tk || !ik {
		t.Errorf("within ttft %v inter %v (known %v %v), want ttft outside, interactivity inside at its end, both known", ttft, inter, tk, ik)
	}
	s.PredictedTTFT, s.MeasuredInteractivityLo = nan, nan
	if _, _, tk, ik := s.Within(); tk || ik {
		t.Errorf("known %v %v, want neither when a value or an interval end is missing", tk, ik)
	}
}
