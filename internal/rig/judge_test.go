package rig

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/trace"
)

// TestJudgeReproducesTheLiveRun runs a short simulated sweep from traces
// named by a relative path, then re-judges it from another working
// directory under the run's own bar: every verdict and figure must come out
// as the live run had them, requests still in flight when a step was judged
// included.
func TestJudgeReproducesTheLiveRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short sweep")
	}
	work := t.TempDir()
	f, err := os.Create(filepath.Join(work, "traces.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := trace.WriteJSONL(f, trace.Synthesize(trace.SynthOptions{Sessions: 40, Seed: 3, HeavyShare: 0.5})); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Chdir(work)
	cfg := config.Default()
	cfg.TimeScale = config.Virtual
	cfg.Workload.Traces = "traces.jsonl" // relative to the working directory
	cfg.Evals.Suites, cfg.Evals.UnderLoadShare = nil, 0
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{2, 4}, 4, 0
	cfg.Sweep.WarmupS, cfg.Sweep.StepS = 60, 180
	cfg.Sweep.Resamples = 200
	// a short client deadline: requests in flight at a step's end time out
	// after the step was judged
	cfg.Workload.RequestTimeoutS = 20
	cfg.Output = "runs"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	live, err := Run(context.Background(), Options{Config: cfg})
	if err != nil && ExitCodeOf(live, err) == ExitRigError {
		t.Fatalf("run: %v", err)
	}
	if len(live.Steps) == 0 {
		t.Fatal("no step was judged")
	}
	saved, err := os.ReadFile(filepath.Join(live.RunDir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(saved), filepath.Join(work, "traces.jsonl")) {
		t.Errorf("config.yaml does not record the traces' absolute path:\n%s", saved)
	}
	inFlight := 0
	if b, err := os.ReadFile(filepath.Join(live.RunDir, "records.jsonl")); err == nil {
		inFlight = strings.Count(string(b), `"in_flight_when_judged":true`)
	}
	t.Logf("%d requests were in flight when their step was judged", inFlight)
	if inFlight == 0 {
		// the virtual clock makes the run the same every time: with a
		// 20 s deadline some request is always in flight at a step's end
		t.Error("no request was in flight when its step was judged: the test no longer checks how judge reads them")
	}

	dir, _ := filepath.Abs(live.RunDir)
	t.Chdir(t.TempDir()) // judge from elsewhere
	d, err := report.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Judge(d, nil)
	if err != nil {
		t.Fatalf("judge from another working directory: %v", err)
	}
	sameJSON(t, "capacity", live.Capacity, again.Capacity)
	sameJSON(t, "target", live.Target, again.Target)
	sameJSON(t, "cost", live.Cost, again.Cost)
	if len(again.Steps) != len(live.Steps) {
		t.Fatalf("judge found %d steps, the run %d", len(again.Steps), len(live.Steps))
	}
	for i := range live.Steps {
		sameJSON(t, "step "+string(live.Steps[i].Verdict), live.Steps[i], again.Steps[i])
	}
	sameJSON(t, "phases", live.Phases, again.Phases)

	// under another bar the capacity phase says the capacity judged now,
	// not the live run's (which read "not established" above a capacity of
	// 8 when a recorded run was judged again at a looser bar)
	loose := cfg.Bar
	loose.TTFTP90S, loose.InteractivityP90TPS, loose.ErrorRate = 1e6, 1e-6, 0.9
	looser, err := Judge(d, &loose)
	if err != nil {
		t.Fatal(err)
	}
	if looser.Capacity.String() == live.Capacity.String() {
		t.Fatalf("a bar nobody misses gave the live run's capacity %q: the test no longer changes the verdict", live.Capacity.String())
	}
	found := false
	for _, ph := range looser.Phases {
		switch ph.Name {
		case PhaseCapacity:
			found = true
			if ph.Detail != looser.Capacity.String() {
				t.Errorf("re-judged under another bar, the capacity phase reads %q, the capacity %q", ph.Detail, looser.Capacity.String())
			}
		case PhaseSweep:
			if !strings.HasPrefix(ph.Detail, "as run, under the run's own bar: ") {
				t.Errorf("re-judged under another bar, the sweep phase reads %q as if judged under it", ph.Detail)
			}
		}
	}
	if !found {
		t.Error("the re-judged summary has no capacity phase")
	}
}

// sameJSON fails the test when a and b do not encode alike.
func sameJSON(t *testing.T, what string, a, b any) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("%s differs:\nlive  %s\njudge %s", what, ja, jb)
	}
}
