package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/verdict"
)

func TestHelpListsCommandsWithExamples(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, want := range []string{"run ", "sim ", "traces ", "Examples:", "headroom run"} {
		if !strings.Contains(help, want) {
			t.Errorf("headroom --help lacks %q:\n%s", want, help)
		}
	}
	// every command says what it does in a line and shows an example
	for _, args := range [][]string{{"run", "--help"}, {"sim", "serve", "--help"}, {"traces", "stats", "--help"}, {"traces", "synth", "--help"}} {
		out.Reset()
		if err := run(context.Background(), args, &out, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "Examples:") {
			t.Errorf("%v has no example:\n%s", args, out.String())
		}
	}
}

func TestBadRunFileNamesFileAndField(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "bad.yaml")
	body := strings.Replace(string(config.DefaultYAML()), "ttft_p90_s: 5.3", "ttft_p90_s: 0", 1)
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"run", "-f", f}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "bar.ttft_p90_s") {
		t.Errorf("error %v does not name the file and field", err)
	}
}

// TestShortSweepAgainstSimulator runs the whole pipeline with `simulate`
// (on the virtual clock): the simulated gateway, synthesised sessions,
// lanes, scraping, verdicts, capacity, the run directory and a loopback
// webhook, then checks that what it says is consistent with itself, and
// re-judges and resumes the run with `judge` and `run --resume`.
func TestShortSweepAgainstSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep skipped in -short mode")
	}
	dir := t.TempDir()
	cfg := strings.NewReplacer(
		// on the virtual clock this ladder crosses the bar at 12 sessions,
		// where the kill switch trips, and repeats the steps either side
		"ladder: [4, 8, 12, 16, 20]", "ladder: [4, 8, 12]",
		"warmup_s: 60", "warmup_s: 180",
		"step_s: 900", "step_s: 90",
		"synth_sessions: 200", "synth_sessions: 40",
		"resamples: 1000", "resamples: 200",
	).Replace(string(config.DefaultYAML()))
	// a loopback webhook receiver: the run posts each phase and step to it
	var hookMu sync.Mutex
	var hook []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Text  string `json:"text"`
			Event string `json:"event"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		hookMu.Lock()
		hook = append(hook, m.Event+": "+m.Text)
		hookMu.Unlock()
	}))
	defer receiver.Close()
	cfg += "notify:\n  webhook: " + receiver.URL + "\n"
	f := filepath.Join(dir, "short.yaml")
	if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), raceSlowdown*90*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"simulate", "-f", f, "--json", "--output", filepath.Join(dir, "runs")}, &stdout, &stderr)
	var ee exitError
	if err != nil && !(errors.As(err, &ee) && (ee.code == 2 || ee.code == 3)) {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	var sum report.Summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("--json output is not a summary: %v\n%s", err, stdout.String())
	}
	// the raw JSON has the fields the issue names
	var raw map[string]any
	_ = json.Unmarshal(stdout.Bytes(), &raw)
	for _, path := range []string{"capacity.sessions", "capacity.lo", "capacity.hi", "capacity.limited_by", "capacity.at_least", "cost.usd_per_session_hour", "run_dir"} {
		if !hasPath(raw, path) {
			t.Errorf("summary JSON lacks %s", path)
		}
	}
	if len(sum.Steps) == 0 {
		t.Fatal("no step was judged")
	}
	bar := sum.Bar
	for _, st := range sum.Steps {
		for _, field := range []string{"ttft_p90", "interactivity_p90", "error_rate"} {
			if !strings.Contains(stdout.String(), `"`+field+`"`) {
				t.Errorf("step JSON lacks %s", field)
			}
		}
		worst := verdict.Pass
		for _, p := range st.Parts {
			worst = verdict.Worse(worst, p.Verdict)
			if p.Verdict == verdict.NoData {
				continue
			}
			v := p.Value
			if !(v.Lo <= v.Center && v.Center <= v.Hi) {
				t.Errorf("%d sessions %s: interval %g-%g does not hold %g", st.Sessions, p.Name, v.Lo, v.Hi, v.Center)
			}
			// the verdict agrees with the value and its interval
			switch p.Name {
			case "ttft":
				checkVerdict(t, st.Sessions, p, v.Hi <= bar.TTFTP90, v.Lo > bar.TTFTP90)
			case "interactivity":
				checkVerdict(t, st.Sessions, p, v.Lo >= bar.InteractivityP90, v.Hi < bar.InteractivityP90)
			case "errors":
				checkVerdict(t, st.Sessions, p, v.Hi < bar.ErrorRate, v.Lo >= bar.ErrorRate)
			}
		}
		if st.Verdict != worst {
			t.Errorf("%d sessions: step verdict %s, worst part %s", st.Sessions, st.Verdict, worst)
		}
		// a step may send no new turn when every lane waits on a long answer
		// (and the kill switch may end it), but the server must have seen work
		if st.Tokens.Prompt == 0 || (st.Verdict == verdict.Pass && st.Load.Planned == 0) {
			t.Errorf("%d sessions: no load measured: %+v %+v", st.Sessions, st.Load, st.Tokens)
		}
	}
	c := sum.Capacity
	// the highest step, not the last: after the repeats a sweep in which
	// no step held runs a lower step once more
	first, last := float64(sum.Steps[0].Sessions), 0.0
	for _, st := range sum.Steps {
		last = max(last, float64(st.Sessions))
	}
	if c.Sessions < 0 || c.Sessions > last || c.Lo > c.Sessions || c.Hi < c.Sessions || c.Hi > last {
		t.Errorf("capacity %g (%g-%g) is not inside the ladder %g-%g", c.Sessions, c.Lo, c.Hi, first, last)
	}
	if c.AtLeast != allPass(sum.Steps) {
		t.Errorf("at_least %v but step verdicts %v", c.AtLeast, verdicts(sum.Steps))
	}
	for _, name := range []string{"config.yaml", "records.jsonl", "metrics.jsonl", "steps.jsonl", "summary.json", "report.md"} {
		if st, err := os.Stat(filepath.Join(sum.RunDir, name)); err != nil || st.Size() == 0 {
			t.Errorf("run directory lacks %s: %v", name, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(sum.RunDir, "report.md"))
	if !strings.Contains(string(md), "| sessions | verdict |") {
		t.Errorf("report.md has no step table:\n%s", md)
	}
	// the exit code follows the target's verdict
	wantCode := map[verdict.Verdict]int{verdict.Pass: 0, verdict.Fail: 2, verdict.TooClose: 3, verdict.NoData: 3}[sum.Target.Verdict]
	if gotCode := 0; err != nil {
		gotCode = ee.code
		if gotCode != wantCode {
			t.Errorf("exit code %d for target verdict %s, want %d", gotCode, sum.Target.Verdict, wantCode)
		}
	} else if wantCode != 0 {
		t.Errorf("exit code 0 for target verdict %s, want %d", sum.Target.Verdict, wantCode)
	}
	for _, name := range []string{"report.html", "report.json", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(sum.RunDir, name)); err != nil {
			t.Errorf("run directory lacks %s: %v", name, err)
		}
	}
	if len(sum.Phases) != 6 || sum.Phases[0].Name != "pre-flight" || sum.Phases[0].Status != "ok" {
		t.Errorf("phases = %+v, want pre-flight ok and all six phases listed", sum.Phases)
	}
	if !sum.PostFlight.Idle {
		t.Errorf("the engine was not idle after the run: %+v", sum.PostFlight)
	}
	hookMu.Lock()
	posted := strings.Join(hook, "\n")
	hookMu.Unlock()
	for _, want := range []string{"phase: sim-recipe-0: pre-flight ok", "step: sim-recipe-0: step 1, 4 sessions", "done: sim-recipe-0: capacity"} {
		if !strings.Contains(posted, want) {
			t.Errorf("the webhook never got %q; it got:\n%s", want, posted)
		}
	}
	checkJudge(t, sum)
	checkResume(t, sum)
}

// checkJudge re-judges the saved run: under the run's own bar it must agree
// with the live verdicts; under a bar nobody meets, nothing passes.
func checkJudge(t *testing.T, live report.Summary) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), []string{"judge", "--json", live.RunDir}, &out, &out)
	var ee exitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("judge: %v", err)
	}
	var again report.Summary
	if err := json.Unmarshal(out.Bytes(), &again); err != nil {
		t.Fatalf("judge --json: %v\n%s", err, out.String())
	}
	if len(again.Steps) != len(live.Steps) {
		t.Fatalf("judge found %d steps, the run %d", len(again.Steps), len(live.Steps))
	}
	for i := range live.Steps {
		a, l := again.Steps[i].TTFTP90.Center, live.Steps[i].TTFTP90.Center
		if again.Steps[i].Verdict != live.Steps[i].Verdict || (a != l && !(math.IsNaN(a) && math.IsNaN(l))) { // no data is NaN on both
			t.Errorf("step %d re-judged %s (P90 TTFT %g), live %s (%g)", i, again.Steps[i].Verdict, again.Steps[i].TTFTP90.Center, live.Steps[i].Verdict, live.Steps[i].TTFTP90.Center)
		}
	}
	out.Reset()
	_ = run(context.Background(), []string{"judge", "--json", "--ttft-p90", "0.001", live.RunDir}, &out, &out)
	if err := json.Unmarshal(out.Bytes(), &again); err != nil {
		t.Fatalf("judge --json under a strict bar: %v", err)
	}
	for _, st := range again.Steps {
		if st.Verdict == verdict.Pass {
			t.Errorf("%d sessions pass a 1 ms TTFT bar", st.Sessions)
		}
	}
}

// checkResume cuts the run back to its first step, as if it had been killed
// during the second, and resumes it: the rest of the ladder runs again.
func checkResume(t *testing.T, live report.Summary) {
	t.Helper()
	steps, err := os.ReadFile(filepath.Join(live.RunDir, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitAfter(string(steps), "\n")[0]
	if err := os.WriteFile(filepath.Join(live.RunDir, "steps.jsonl"), []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(live.RunDir, "summary.json"))
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"run", "--json", "--resume", live.RunDir}, &out, &errOut)
	var ee exitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("resume: %v\n%s", err, errOut.String())
	}
	var resumed report.Summary
	if err := json.Unmarshal(out.Bytes(), &resumed); err != nil {
		t.Fatalf("resume --json: %v\n%s", err, out.String())
	}
	if len(resumed.Steps) < 2 || resumed.Steps[0].Sessions != live.Steps[0].Sessions || resumed.Steps[1].Sessions != live.Steps[1].Sessions {
		t.Errorf("resumed run has steps %v, want the first step kept and the ladder continued", sessionsOf(resumed.Steps))
	}
	if resumed.Steps[1].MeasureStartS <= resumed.Steps[0].EndS {
		t.Errorf("the resumed step starts at %gs, before the saved step ended (%gs)", resumed.Steps[1].MeasureStartS, resumed.Steps[0].EndS)
	}
	if resumed.RunDir != live.RunDir {
		t.Errorf("resume wrote to %s, not %s", resumed.RunDir, live.RunDir)
	}
}

func sessionsOf(steps []report.Step) []int {
	var out []int
	for _, s := range steps {
		out = append(out, s.Sessions)
	}
	return out
}

func checkVerdict(t *testing.T, n int, p verdict.Part, pass, fail bool) {
	t.Helper()
	want := verdict.TooClose
	switch {
	case pass:
		want = verdict.Pass
	case fail:
		want = verdict.Fail
	}
	// an interval ending exactly on an open bucket edge may read fail where
	// the closed comparison says too close; both are honest, pass is not.
	if p.Verdict != want && !(p.Verdict == verdict.Fail && want == verdict.TooClose) {
		t.Errorf("%d sessions %s: verdict %s, but value %g (%g-%g) against bar %g says %s", n, p.Name, p.Verdict, p.Value.Center, p.Value.Lo, p.Value.Hi, p.Bar, want)
	}
}

func allPass(steps []report.Step) bool {
	for _, s := range steps {
		if s.Verdict != verdict.Pass {
			return false
		}
	}
	return true
}

func verdicts(steps []report.Step) []verdict.Verdict {
	var out []verdict.Verdict
	for _, s := range steps {
		out = append(out, s.Verdict)
	}
	return out
}

func hasPath(m map[string]any, path string) bool {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = mm[k]; !ok {
			return false
		}
	}
	return true
}

// printedConfig runs headroom with args and --print-config and reads back
// the run file it prints, which must itself be a valid run file.
func printedConfig(t *testing.T, args ...string) config.Run {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), append(args, "--print-config"), &out, &errOut); err != nil {
		t.Fatalf("headroom %v: %v\n%s", args, err, errOut.String())
	}
	cfg, err := config.Parse(out.Bytes(), "printed config")
	if err != nil {
		t.Fatalf("the printed config of %v is not a valid run file: %v\n%s", args, err, out.String())
	}
	return cfg
}

func TestRunWithoutFileFromFlags(t *testing.T) {
	// --endpoint alone points the default at a real server: unscaled clock,
	// no simulator section, metrics beside the API
	cfg := printedConfig(t, "run", "--endpoint", "http://127.0.0.1:9/", "--model", "m")
	rc := cfg.Recipe
	if cfg.TimeScale != 1 || rc.Endpoint != "http://127.0.0.1:9/" || rc.Model != "m" || rc.Sim.Profile != "" {
		t.Errorf("time_scale %g, endpoint %q, model %q, sim %+v", cfg.TimeScale, rc.Endpoint, rc.Model, rc.Sim)
	}
	if len(rc.Metrics) != 1 || rc.Metrics[0] != "http://127.0.0.1:9/metrics" {
		t.Errorf("metrics = %v, want the endpoint's /metrics", rc.Metrics)
	}
	if d := config.Default(); cfg.Bar != d.Bar || cfg.Sweep.Target != d.Sweep.Target {
		t.Errorf("the default's bar and sweep should be kept, got %+v", cfg.Bar)
	}

	// every flag, then --set on top
	cfg = printedConfig(t, "run", "--endpoint", "https://gw.example.com", "--model", "glm",
		"--metrics", "http://127.0.0.1:9/metrics", "--metrics", "http://127.0.0.2:9/metrics",
		"--prometheus", "http://127.0.0.1:9090", "--selector", `{namespace="llm",job="vllm"}`,
		"--api-key-env", "GW_KEY",
		"--set", "sweep.ladder=[4,8,16]", "--set", "sweep.stress=16", "--set", "bar.ttft_p90_s=3", "--set", "recipe.headers.X-Team=blue")
	rc = cfg.Recipe
	if len(rc.Metrics) != 2 || rc.Metrics[1] != "http://127.0.0.2:9/metrics" || rc.APIKeyEnv != "GW_KEY" {
		t.Errorf("metrics %v, api_key_env %q", rc.Metrics, rc.APIKeyEnv)
	}
	if p := rc.Prometheus; p == nil || p.URL != "http://127.0.0.1:9090" || p.Selector != `{namespace="llm",job="vllm"}` {
		t.Errorf("prometheus = %+v", p)
	}
	if len(cfg.Sweep.Ladder) != 3 || cfg.Sweep.Ladder[2] != 16 || cfg.Bar.TTFTP90S != 3 {
		t.Errorf("ladder %v, ttft bar %g", cfg.Sweep.Ladder, cfg.Bar.TTFTP90S)
	}
	if _, ok := rc.Headers["X-Team"]; !ok { // its value is redacted when printed
		t.Errorf("headers = %v, want X-Team", rc.Headers)
	}

	// --set applies on top of -f FILE too, and plan takes the same flags
	f := filepath.Join(t.TempDir(), "run.yaml")
	if err := os.WriteFile(f, config.DefaultYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg = printedConfig(t, "run", "-f", f, "--set", "sweep.ladder[0]=2", "--set", "workload.seed=7"); cfg.Sweep.Ladder[0] != 2 || cfg.Workload.Seed != 7 {
		t.Errorf("--set on a file: ladder %v, seed %d", cfg.Sweep.Ladder, cfg.Workload.Seed)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"plan", "--endpoint", "http://127.0.0.1:9/", "--model", "m", "--set", "sweep.ladder=[2,4]", "--set", "sweep.target=2", "--set", "sweep.stress=4"}, &out, &out); err != nil {
		t.Fatalf("plan with flags: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "http://127.0.0.1:9/metrics") {
		t.Errorf("the plan does not read the endpoint's metrics:\n%s", out.String())
	}
}

func TestRunFileFlagErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	body := strings.NewReplacer("  traces: synth", "  trace: synth", "  kv_full: 0.98", "  kv_ful: 0.98", "  threshold: 0.9", "  threshold: 9").Replace(string(config.DefaultYAML()))
	if err := os.WriteFile(bad, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	line := func(sub string) string {
		return strconv.Itoa(strings.Count(body[:strings.Index(body, sub)], "\n") + 1)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		// An unknown --set path names the nearest field.
		{"unknown --set", []string{"run", "--print-config", "--set", "workload.trace=x"}, []string{"--set workload.trace: workload.trace: unknown field; did you mean workload.traces?"}},
		// --set needs path=value.
		{"no value", []string{"plan", "--set", "sweep.ladder"}, []string{"give path=value"}},
		// A bad value set by a flag is named by the flag.
		{"invalid --set", []string{"plan", "--set", "sweep.ladder=[8,4]"}, []string{"--set sweep.ladder: sweep.ladder[1]: must be larger"}},
		// A bad endpoint is named by --endpoint.
		{"bad endpoint", []string{"run", "--print-config", "--endpoint", "localhost:8000"}, []string{"--endpoint: recipe.endpoint:"}},
		// Every problem in a file, each with its line.
		{"bad file", []string{"run", "--print-config", "-f", bad}, []string{
			"bad.yaml: 3 problems",
			"bad.yaml:" + line("trace: synth") + ":3: workload.trace: unknown field; did you mean workload.traces?",
			"bad.yaml:" + line("kv_ful") + ":3: sweep.kv_ful: unknown field; did you mean sweep.kv_full?",
			"bad.yaml:" + line("threshold: 9") + ":3: evals.threshold: must be a pass rate",
		}},
		// --resume takes the saved run file as it is.
		{"resume with flags", []string{"run", "--resume", dir, "--endpoint", "http://127.0.0.1:9/"}, []string{"drop -f and the flags"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), c.args, &out, &out)
			if err == nil {
				t.Fatalf("no error for %v", c.args)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestRunFileFlagsHaveExamples checks that run and plan show an example
// of each run-file flag, and that every such example gives a valid run
// file.
func TestRunFileFlagsHaveExamples(t *testing.T) {
	for _, cmd := range []string{"run", "plan"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{cmd, "--help"}, &out, &out); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"headroom " + cmd + " --endpoint http://", "--metrics http://", "--prometheus http://", "--selector '{", "--set sweep.ladder=[", "--api-key-env"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s --help lacks %q", cmd, want)
			}
		}
	}
	examples := strings.ReplaceAll(runFileFlagsExample("run"), "\\\n", " ")
	n := 0
	for _, line := range strings.Split(examples, "\n") {
		line, _, _ = strings.Cut(strings.TrimSpace(line), "#")
		args := strings.Fields(line)
		if len(args) < 2 || args[0] != "headroom" {
			continue
		}
		for i, a := range args {
			args[i] = strings.Trim(strings.Replace(a, "examples/run.yaml", "../../examples/run.yaml", 1), "'")
		}
		printedConfig(t, args[1:]...)
		n++
	}
	if n < 5 {
		t.Errorf("checked %d examples, want every one of the 5", n)
	}
}
