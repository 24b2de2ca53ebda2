package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// lineOf is the 1-based line of the first line of text holding sub.
func lineOf(t *testing.T, text, sub string) int {
	t.Helper()
	i := strings.Index(text, sub)
	if i < 0 {
		t.Fatalf("test setup: %q not in the file", sub)
	}
	return strings.Count(text[:i], "\n") + 1
}

func TestErrorsNameLineAndNearestField(t *testing.T) {
	base := string(defaultYAML)
	type want struct {
		at   string // text on the line the problem must name
		path string
		msg  string // part of the message
	}
	cases := []struct {
		name     string
		from, to string // replace from with to in the default file
		want     []want
	}{
		// Two unknown fields and one invalid value: all three, in line order.
		{"three at once", "  seed: 1\n  mix:", "  trace: synth2\n  seed: 1\n  mix:", []want{
			{"trace: synth2", "workload.trace", "did you mean workload.traces?"},
		}},
		// A swapped pair of letters is one edit.
		{"transposed", "  engine: vllm", "  engnie: vllm", []want{{"engnie:", "recipe.engnie", "did you mean recipe.engine?"}}},
		// A longer spelling of a field is its nearest.
		{"longer name", "  warmup_s: 60", "  warmup_seconds: 60", []want{{"warmup_seconds", "sweep.warmup_seconds", "did you mean sweep.warmup_s?"}}},
		// A field put in the wrong section names the section it belongs to.
		{"wrong section", "time_scale: 100", "time_scale: 100\nladder: [1, 2]", []want{{"ladder: [1, 2]", "ladder", "did you mean sweep.ladder?"}}},
		// Nothing near: the section's fields are listed.
		{"nothing near", "  ttft_p90_s: 5.3", "  ttft_p90_s: 5.3\n  zzzz: 1", []want{{"zzzz", "bar.zzzz", "the fields of bar are ttft_p90_s, interactivity_p90_tps, error_rate, client_errors"}}},
		// A word where a number goes, with its line.
		{"word for number", "synth_sessions: 200", "synth_sessions: many", []want{{"synth_sessions: many", "workload.synth_sessions", `want a whole number, got "many"`}}},
		// A quoted number is a string.
		{"quoted number", "ttft_p90_s: 5.3", `ttft_p90_s: "5.3"`, []want{{"ttft_p90_s", "bar.ttft_p90_s", "want a number"}}},
		// A number where a list goes; what follows from the list being
		// unread (the target is not a step of it) is not reported.
		{"scalar for list", "ladder: [4, 8, 12, 16, 20]", "ladder: 4", []want{{"ladder: 4", "sweep.ladder", "want a list"}}},
		// A seed is a whole number >= 0.
		{"negative seed", "  synth_sessions: 200\n  seed: 1", "  synth_sessions: 200\n  seed: -1", []want{{"seed: -1", "workload.seed", "want a whole number >= 0"}}},
		// A type only the decoder knows (a number too big) still gets its line.
		{"decoder's type error", "  synth_sessions: 200\n  seed: 1", "  synth_sessions: 99999999999999999999999", []want{{"synth_sessions: 999", "workload.synth_sessions", "int"}}},
		// A key set twice.
		{"duplicate", "  step_s: 900", "  step_s: 900\n  step_s: 901", []want{{"step_s: 901", "sweep.step_s", "is set twice"}}},
		// An invalid list item is placed at the item.
		{"ladder item", "ladder: [4, 8, 12, 16, 20]", "ladder: [4, 8, 12, 10, 20]", []want{{"ladder: [4, 8, 12, 10", "sweep.ladder[3]", "must be larger"}}},
		// A field a section embeds (the Prometheus source's auth) is its own; a typo of it is not.
		{"inline auth", "  sim:\n", "  prometheus: {url: http://p:9090, bearer_tokn_env: T}\n  sim:\n", []want{{"bearer_tokn_env", "recipe.prometheus.bearer_tokn_env", "did you mean recipe.prometheus.bearer_token_env?"}}},
		// A YAML syntax error keeps its line.
		{"syntax", "ladder: [4, 8, 12, 16, 20]", "ladder: [4, 8", []want{{"ladder: [4, 8", "", ""}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.from) {
				t.Fatalf("test setup: %q not in default.yaml", c.from)
			}
			text := strings.Replace(base, c.from, c.to, 1)
			if c.name == "three at once" { // add a second unknown field and a bad value
				text = strings.Replace(text, "  kv_full: 0.98", "  kv_ful: 0.98", 1)
				text = strings.Replace(text, "  threshold: 0.9", "  threshold: 9", 1)
				c.want = append(c.want,
					want{"kv_ful: 0.98", "sweep.kv_ful", "did you mean sweep.kv_full?"},
					want{"threshold: 9", "evals.threshold", "must be a pass rate"})
			}
			_, err := Parse([]byte(text), "run.yaml")
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error %v is not an *Errors", err)
			}
			if c.name == "syntax" { // the parser's line is where it noticed
				if len(errs.List) != 1 || errs.List[0].Line == 0 {
					t.Fatalf("syntax error %v has no line", err)
				}
				return
			}
			if len(errs.List) != len(c.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(errs.List), len(c.want), err)
			}
			for i, w := range c.want {
				f := errs.List[i]
				line := lineOf(t, text, w.at)
				if f.Line != line || f.Col == 0 || f.Path != w.path || !strings.Contains(f.Msg, w.msg) {
					t.Errorf("problem %d = %q (line %d), want line %d, path %s, message with %q", i, f.String(), f.Line, line, w.path, w.msg)
				}
				if !strings.Contains(err.Error(), f.String()) {
					t.Errorf("error text lacks %q:\n%v", f.String(), err)
				}
			}
		})
	}
}

func TestErrorTextReadsFileLineColumn(t *testing.T) {
	text := strings.Replace(string(defaultYAML), "  traces: synth", "  trace: synth", 1)
	_, err := Parse([]byte(text), "run.yaml")
	line := lineOf(t, text, "  trace: synth")
	want := "run.yaml:" + strconv.Itoa(line) + ":3: workload.trace: unknown field; did you mean workload.traces?"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %v, want it to start %q", err, want)
	}
}

func TestFreeFormAndMapFieldsTakeAnyKeys(t *testing.T) {
	text := strings.Replace(string(defaultYAML), "  sim:\n    profile: default",
		"  headers: {X-Team: blue, x-anything: \"${HOME}\"}\n  sim:\n    profile: default\n    faults: [{kind: anything, at_s: 3}]", 1)
	if _, err := Parse([]byte(text), "run.yaml"); err != nil {
		t.Errorf("headers and sim.faults take any keys, got %v", err)
	}
	// the decoder matches field names ignoring case; so does the walk
	text = strings.Replace(string(defaultYAML), "  ttft_p90_s: 5.3", "  TTFT_P90_S: 5.3", 1)
	if _, err := Parse([]byte(text), "run.yaml"); err != nil {
		t.Errorf("a field in capitals is the decoder's field, got %v", err)
	}
}

func TestRecipeFileProblemsNameTheRecipeFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	recipeStart := strings.Index(string(defaultYAML), "recipe:\n")
	recipeEnd := strings.Index(string(defaultYAML), "bar:\n")
	run := string(defaultYAML[:recipeStart]) + "recipe: {file: r.yaml}\n" + string(defaultYAML[recipeEnd:])
	runFile := write("run.yaml", run)
	okRecipe := "name: r0\nnodes: 2\ngpus_per_node: 8\nusd_per_gpu_hour: 1.8\nendpoint: sim\nmodel: m\n"
	cases := []struct {
		name, recipe string
		want         string // the problem's text
	}{
		// An unknown field in the recipe file is placed in the recipe file.
		{"unknown", okRecipe + "nodez: 2\n", filepath.Join(dir, "r.yaml") + ":7:1: nodez: unknown field; did you mean nodes?"},
		// A core field the run file checks is placed in the recipe file too.
		{"invalid", strings.Replace(okRecipe, "nodes: 2", "nodes: 0", 1), filepath.Join(dir, "r.yaml") + ":2:1: recipe.nodes: must be at least 1"},
		// A field the recipe package checks, likewise.
		{"recipe's own check", okRecipe + "copies: -1\n", filepath.Join(dir, "r.yaml") + ":7:1: copies: must be >= 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			write("r.yaml", c.recipe)
			_, err := Load(runFile)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error = %v, want %q", err, c.want)
			}
		})
	}
	write("r.yaml", okRecipe)
	if _, err := Load(runFile); err != nil {
		t.Errorf("a good recipe file: %v", err)
	}
}

func TestNearest(t *testing.T) {
	names := []string{"traces", "synth_sessions", "seed", "mix", "think_time", "think_time_cap_s"}
	for key, want := range map[string]string{
		"trace":         "traces",
		"tracse":        "traces",
		"Traces":        "traces",
		"synth_session": "synth_sessions",
		"think_time_s":  "think_time",
		"sed":           "seed",
		"banana":        "",
		"x":             "",
	} {
		if got := nearest(key, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", key, got, want)
		}
	}
}
