package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseSet(t *testing.T) {
	cases := []struct {
		arg        string
		path, val  string
		errContain string
	}{
		// A list as YAML flow.
		{arg: "sweep.ladder=[4,8,16]", path: "sweep.ladder", val: "[4,8,16]"},
		// Only the first = splits; the value may hold more.
		{arg: "recipe.headers.X-Q=a=b", path: "recipe.headers.X-Q", val: "a=b"},
		// An empty value is allowed: it clears the field.
		{arg: "sweep.target=", path: "sweep.target"},
		// A list item.
		{arg: "sweep.ladder[2]=9", path: "sweep.ladder[2]", val: "9"},
		// No =.
		{arg: "sweep.ladder", errContain: "give path=value"},
		// Nothing before =.
		{arg: "=3", errContain: "the field before = is empty"},
		// An empty step.
		{arg: "sweep..ladder=3", errContain: "empty field name"},
		// A bad index.
		{arg: "sweep.ladder[x]=3", errContain: "not a list index"},
	}
	for _, c := range cases {
		o, err := ParseSet(c.arg)
		if c.errContain != "" {
			if err == nil || !strings.Contains(err.Error(), c.errContain) {
				t.Errorf("ParseSet(%q) error = %v, want %q", c.arg, err, c.errContain)
			}
			continue
		}
		if err != nil || o.Path != c.path || o.Value != c.val || o.Flag != "--set "+c.path {
			t.Errorf("ParseSet(%q) = %+v, %v", c.arg, o, err)
		}
	}
}

func sets(t *testing.T, args ...string) []Override {
	t.Helper()
	var ovs []Override
	for _, a := range args {
		o, err := ParseSet(a)
		if err != nil {
			t.Fatal(err)
		}
		ovs = append(ovs, o)
	}
	return ovs
}

func TestSetChangesTheDefault(t *testing.T) {
	r, err := DefaultWith(sets(t,
		"sweep.ladder=[4,8,16]",
		"sweep.ladder[1]=10",
		"sweep.ladder[3]=20", // one past the end adds an item
		"sweep.target=10",
		"sweep.stress=", // cleared: no stress step
		"bar.ttft_p90_s=3",
		"recipe.headers.X-Team=blue",
		"recipe.name=on", // a string field takes the text as written
		"recipe.sim=null",
		"evals.suites=[]",
		"workload.mix.heavy=0.7",
	)...)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Sweep.Ladder, []int{4, 10, 16, 20}) || r.Sweep.Target != 10 || r.Sweep.Stress != 0 {
		t.Errorf("sweep = %v target %d stress %d", r.Sweep.Ladder, r.Sweep.Target, r.Sweep.Stress)
	}
	if r.Bar.TTFTP90S != 3 || r.Recipe.Headers["X-Team"] != "blue" || r.Recipe.Name != "on" {
		t.Errorf("bar %g, headers %v, name %q", r.Bar.TTFTP90S, r.Recipe.Headers, r.Recipe.Name)
	}
	if !reflect.DeepEqual(r.Recipe.Sim, SimSpec{}) || len(r.Evals.Suites) != 0 || r.Workload.Mix.Heavy != 0.7 || r.Workload.Mix.Light != 0.5 {
		t.Errorf("sim %+v, suites %v, mix %+v", r.Recipe.Sim, r.Evals.Suites, r.Workload.Mix)
	}
	// the default itself is untouched
	if d := Default(); d.Bar.TTFTP90S != 5.3 || d.Recipe.Sim.Profile == "" {
		t.Errorf("the default changed: %+v", d.Bar)
	}
}

func TestSetMakesSectionsAndKeepsSelectors(t *testing.T) {
	r, err := DefaultWith(sets(t,
		"recipe.endpoint=http://127.0.0.1:9",
		"time_scale=1",
		"recipe.prometheus.url=http://127.0.0.1:9090",
		`recipe.prometheus.selector={namespace="llm",job="vllm"}`,
		"recipe.prometheus.bearer_token_env=PROM_TOKEN", // inline auth field
	)...)
	if err != nil {
		t.Fatal(err)
	}
	p := r.Recipe.Prometheus
	if p == nil || p.URL != "http://127.0.0.1:9090" || p.Selector != `{namespace="llm",job="vllm"}` || p.BearerTokenEnv != "PROM_TOKEN" {
		t.Errorf("prometheus = %+v", p)
	}
}

func TestSetErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		// An unknown field names the nearest one.
		{"unknown", []string{"workload.trace=x"}, "--set workload.trace: workload.trace: unknown field; did you mean workload.traces?"},
		// Below a single value there are no fields.
		{"under a value", []string{"bar.ttft_p90_s.x=1"}, "bar.ttft_p90_s is a single value"},
		// An index on a section.
		{"index on section", []string{"bar[0]=1"}, "bar is not a list"},
		// Past the end of a list.
		{"past end", []string{"sweep.ladder[9]=1"}, "has 5 items, so [9] is past its end"},
		// A value of the wrong type is named by its flag, not a line.
		{"wrong type", []string{"sweep.ladder=[4,x]"}, `--set sweep.ladder: sweep.ladder[1]: want a whole number, got "x"`},
		// An invalid value goes through the same validation as a file.
		{"invalid", []string{"sweep.ladder=[8,4]"}, "--set sweep.ladder: sweep.ladder[1]: must be larger"},
		// Not YAML.
		{"not yaml", []string{"sweep.ladder=[4,"}, "--set sweep.ladder: the value is not YAML"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DefaultWith(sets(t, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error = %v, want %q", err, c.want)
			}
		})
	}
}

func TestSetOnAFileKeepsItsLines(t *testing.T) {
	text := strings.Replace(string(defaultYAML), "  threshold: 0.9", "  threshold: 9", 1)
	_, err := ParseWith([]byte(text), "run.yaml", sets(t, "bar.ttft_p90_s=-1")...)
	var errs *Errors
	if !errors.As(err, &errs) || len(errs.List) != 2 {
		t.Fatalf("want two problems, got %v", err)
	}
	if f := errs.List[0]; f.Path != "evals.threshold" || f.Line != lineOf(t, text, "threshold: 9") {
		t.Errorf("file problem = %s, want it at the file's line", f)
	}
	if f := errs.List[1]; f.Path != "bar.ttft_p90_s" || f.Flag != "--set bar.ttft_p90_s" {
		t.Errorf("flag problem = %s, want it named by its flag", f)
	}
}
