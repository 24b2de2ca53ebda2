package rig

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sweep"
	"sigs.k8s.io/yaml"
)

// killedRun writes the run directory a run killed during its second step
// leaves: one finished step, the killed step's records and scrapes, and a
// torn last line in each file.
func killedRun(t *testing.T) *report.Dir {
	t.Helper()
	d, err := report.NewDir(t.TempDir(), "r", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("config.yaml", config.DefaultYAML()); err != nil {
		t.Fatal(err)
	}
	lines := func(name string, vs []any, torn string) {
		var b bytes.Buffer
		for _, v := range vs {
			line, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(append(line, '\n'))
		}
		b.WriteString(torn)
		if err := os.WriteFile(d.File(name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := func(step int, phase string, send float64, errClass string) load.Record {
		return load.Record{V: load.RecordVersion, Step: step, Sessions: 2 * (step + 1), Phase: phase, Session: "s", Tier: "light", Send: send, Status: 200, Error: errClass}
	}
	lines("steps.jsonl", []any{sweep.StepResult{Index: 0, Sessions: 2, Start: 0, MeasureStart: 60, End: 240, RepeatOf: -1}}, `{"index":1,"sessions":4,"sta`)
	lines("records.jsonl", []any{
		rec(0, load.PhaseWarmup, 10, ""),
		rec(0, load.PhaseMeasure, 100, ""),
		rec(1, load.PhaseWarmup, 245, ""), // the killed step's warm-up
		// in flight when step 1 was judged, then finished (timed out)
		savedRecord{Record: rec(0, load.PhaseMeasure, 230, ""), InFlight: true},
		savedRecord{Record: rec(0, load.PhaseMeasure, 230, load.ErrTimeout), Late: true},
		rec(1, load.PhaseMeasure, 310, ""), // the killed step's judged time
		rec(1, load.PhaseMeasure, 320, load.ErrServer),
	}, `{"v":1,"step":1,"phase":"meas`)
	var samples []any
	for at := time.Duration(0); at <= 330*time.Second; at += 30 * time.Second {
		s := signal.NewSample(at)
		s.Counter[signal.PromptTokens] = at.Seconds()
		samples = append(samples, s)
	}
	lines("metrics.jsonl", samples, `{"at":3600000000`)
	return d
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s ends in a torn line: %q", path, b[bytes.LastIndexByte(b, '\n')+1:])
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestResumeRepairsAKilledRun: before resuming, a torn last line is cut off
// each file, and the killed step's records and scrapes are dropped so that
// step runs again whole and nothing is counted twice.
func TestResumeRepairsAKilledRun(t *testing.T) {
	d := killedRun(t)
	notes, err := repairRun(d)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(notes, "\n")
	for _, want := range []string{"steps.jsonl: cut a torn last line", "records.jsonl: cut a torn last line", "metrics.jsonl: cut a torn last line",
		"dropped 3 records and 3 scrapes of step 2"} {
		if !strings.Contains(all, want) {
			t.Errorf("the repair does not say %q:\n%s", want, all)
		}
	}
	if got := readLines(t, d.File("steps.jsonl")); len(got) != 1 {
		t.Errorf("steps.jsonl holds %d lines, want the finished step only", len(got))
	}
	recs := readLines(t, d.File("records.jsonl"))
	if len(recs) != 4 || strings.Contains(strings.Join(recs, "\n"), `"step":1`) {
		t.Errorf("records.jsonl after the repair:\n%s", strings.Join(recs, "\n"))
	}
	if got := readLines(t, d.File("metrics.jsonl")); len(got) != 9 { // 0 s to 240 s
		t.Errorf("metrics.jsonl holds %d scrapes, want the 9 up to the finished step's end", len(got))
	}
	saved, err := ReadRun(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(saved.Warnings) > 0 || len(saved.Steps) != 1 || len(saved.Records) != 3 { // the late outcome is not judged
		t.Errorf("read back: %d steps, %d records, warnings %v", len(saved.Steps), len(saved.Records), saved.Warnings)
	}
	// a second repair finds nothing to do
	if notes, err := repairRun(d); err != nil || len(notes) > 0 {
		t.Errorf("a repaired run repaired again: %v %v", notes, err)
	}
}

// TestReadRunSkipsATornTail: judge reads a killed run as it is, without
// changing it: a torn last line is skipped with a warning, and a request
// that was in flight when its step was judged reads as in flight again.
func TestReadRunSkipsATornTail(t *testing.T) {
	d := killedRun(t)
	before, _ := os.ReadFile(d.File("records.jsonl"))
	saved, err := ReadRun(d)
	if err != nil {
		t.Fatalf("a torn last line stops ReadRun: %v", err)
	}
	if after, _ := os.ReadFile(d.File("records.jsonl")); !bytes.Equal(before, after) {
		t.Error("ReadRun changed records.jsonl")
	}
	all := strings.Join(saved.Warnings, "\n")
	for _, name := range []string{"steps.jsonl", "records.jsonl", "metrics.jsonl"} {
		if !strings.Contains(all, name+": skipped a torn last line") {
			t.Errorf("no warning about the torn line of %s:\n%s", name, all)
		}
	}
	if len(saved.Steps) != 1 || len(saved.Records) != 6 || len(saved.Samples) != 12 { // the late outcome is not judged
		t.Errorf("%d steps, %d records, %d samples", len(saved.Steps), len(saved.Records), len(saved.Samples))
	}
	r := saved.Records[3]
	if !r.Pending || r.Error != "" || r.Status != 0 || r.Send != 230 {
		t.Errorf("a request in flight when its step was judged reads %+v", r)
	}

	// a line broken in the middle of the file is named with its line
	if err := os.WriteFile(d.File("records.jsonl"), append([]byte("{\"v\":1,\"st\n"), before...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRun(d); err == nil || !strings.Contains(err.Error(), "records.jsonl:1") {
		t.Errorf("a corrupt line mid-file: %v, want an error naming records.jsonl:1", err)
	}
}

// TestResumeRefusesLostCredentials: a run whose metrics URL carried basic
// auth in its user info saves it redacted ("redacted@"); resuming from it
// would scrape without the password. It is refused before anything runs,
// naming the field and where credentials belong, and the directory is left
// as it was.
func TestResumeRefusesLostCredentials(t *testing.T) {
	cfg := config.Default()
	cfg.Recipe.Endpoint, cfg.TimeScale = "http://127.0.0.1:9", 1
	cfg.Recipe.Metrics = []string{"http://scraper:pw-1234@127.0.0.1:9/metrics"}
	cfg.Recipe.Sim = config.SimSpec{}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, b := savedRunFile(t, cfg.Redacted())
	_, _, err := readResume(d)
	if err == nil || !strings.Contains(err.Error(), "recipe.metrics[0]") || !strings.Contains(err.Error(), "metrics_auth") {
		t.Fatalf("resume from a run file whose credentials were redacted: %v", err)
	}
	if after, _ := os.ReadFile(d.File("config.yaml")); !bytes.Equal(after, b) {
		t.Error("the refused resume changed config.yaml")
	}
}

// TestResumeDropsRedactedNotify: config.yaml keeps a webhook as
// scheme://host/[redacted] (its path is the secret) and a GitHub API URL's
// user info as "redacted". A resumed run posted to those URLs, which are
// not the ones it was given; it now resumes without them and says so.
func TestResumeDropsRedactedNotify(t *testing.T) {
	cfg := config.Default()
	cfg.Notify.Webhook = "https://hooks.example.com/services/T000/B000/s3cret"
	cfg.Notify.GitHub = &config.GitHub{API: "https://bot:pw-1234@github.example.com/api/v3", Repo: "o/r", PR: 1, TokenEnv: "GH_TOKEN"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	saved := cfg.Redacted()
	if _, got := saved.WithoutRedactedNotify(); strings.Join(got, ",") != "notify.webhook,notify.github.api" {
		t.Fatalf("redacted notify targets %v, want the webhook and the GitHub API", got)
	}
	if kept, got := cfg.WithoutRedactedNotify(); len(got) != 0 || kept.Notify.Webhook != cfg.Notify.Webhook || kept.Notify.GitHub != cfg.Notify.GitHub {
		t.Errorf("a run file as given reads %v redacted (notify %+v), want none dropped", got, kept.Notify)
	}
	d, _ := savedRunFile(t, saved)
	got, notes, err := readResume(d)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config.Notify.Webhook != "" || got.Config.Notify.GitHub != nil {
		t.Errorf("resumed notify %+v: want the redacted targets dropped", got.Config.Notify)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "notify.webhook, notify.github.api") {
		t.Errorf("notes %q: want the dropped targets named", notes)
	}
}

// savedRunFile writes cfg as a run directory's config.yaml, as a run does,
// and returns the directory and the bytes written.
func savedRunFile(t *testing.T, cfg config.Run) (*report.Dir, []byte) {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := report.NewDir(t.TempDir(), "r", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("config.yaml", b); err != nil {
		t.Fatal(err)
	}
	return d, b
}
