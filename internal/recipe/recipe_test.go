package recipe

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseErrorsNameFileAndField(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // substrings the error must hold
	}{
		// An unknown field is named, with the file.
		{"unknown field", "name: a\nnodez: 2\n", []string{"r.yaml", "nodez"}},
		// A wrong type names the field.
		{"wrong type", "name: a\nnodes: two\n", []string{"r.yaml", "nodes"}},
		// Unknown deployer type.
		{"unknown deployer", "name: a\ndeploy: {type: helm}\n", []string{"deploy.type", "helm"}},
		// Kubernetes needs manifests.
		{"kubernetes without manifests", "name: a\ndeploy: {type: kubernetes}\n", []string{"deploy.kubernetes.manifests"}},
		// Command needs an undeploy: rollback always runs.
		{"command without undeploy", "name: a\ndeploy: {type: command, command: {deploy: [true]}}\n", []string{"deploy.command.undeploy"}},
		// A section for a different deployer than the type.
		{"section without type", "name: a\ndeploy: {command: {deploy: [a], undeploy: [b]}}\n", []string{"deploy.type"}},
		// Negative copies.
		{"negative copies", "name: a\ncopies: -1\n", []string{"copies"}},
		// A recipe file may not point at another.
		{"file in a recipe file", "file: other.yaml\n", []string{"file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "r.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadAndResolve(t *testing.T) {
	r, err := Load("testdata/recipe-1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r.Dir != "testdata" || r.Deploy.Kubernetes.Namespace != "serving" || len(r.Args) != 6 {
		t.Errorf("loaded %+v", r)
	}
	if got := r.Path(r.Deploy.Kubernetes.Manifests[0]); got != filepath.Join("testdata", "recipe-1.k8s.yaml") {
		t.Errorf("manifest path = %q", got)
	}
	p, ok := r.ParentFile()
	if !ok || p != filepath.Join("testdata", "recipe-0.yaml") {
		t.Errorf("ParentFile = %q, %v", p, ok)
	}
	if _, ok := (Recipe{Parent: "recipe-0-vllm"}).ParentFile(); ok {
		t.Error("a parent name read as a file")
	}

	// A run file's recipe that names a file reads it relative to the run file.
	got, err := Resolve(Recipe{File: "recipe-0.yaml"}, "testdata")
	if err != nil || got.Name != "recipe-0-vllm" {
		t.Errorf("Resolve(file) = %q, %v", got.Name, err)
	}
	// Inline recipes come back as they are, with the run file's folder.
	got, err = Resolve(Recipe{Name: "x"}, "runs")
	if err != nil || got.Name != "x" || got.Dir != "runs" {
		t.Errorf("Resolve(inline) = %+v, %v", got, err)
	}
	// File plus other fields is ambiguous.
	if _, err := Resolve(Recipe{File: "recipe-0.yaml", Nodes: 2}, "testdata"); err == nil || !strings.Contains(err.Error(), "recipe.file") {
		t.Errorf("Resolve(file and fields) error = %v", err)
	}
	// A missing file says so.
	if _, err := Load(filepath.Join(t.TempDir(), "nope.yaml")); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("Load(missing) error = %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func base() Recipe {
	return Recipe{Name: "r0", Engine: "vllm", Image: "vllm:1", Args: []string{"--tp", "8", "--prefix-caching"},
		Nodes: 2, GPUsPerNode: 8, USDPerGPUHour: 1.8, Endpoint: "http://g:8000", Model: "m", Mapping: "vllm"}
}

func TestDiff(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Recipe)
		want   []Change
	}{
		// Identical recipes differ in nothing.
		{"same", func(r *Recipe) {}, nil},
		// Reordered flags, and "--tp=8" for "--tp 8", are not changes.
		{"flags reordered", func(r *Recipe) { r.Args = []string{"--prefix-caching", "--tp=8"} }, nil},
		// Copies 0 reads as 1.
		{"copies 0 and 1", func(r *Recipe) { r.Copies = 1 }, nil},
		// One flag's value.
		{"flag value", func(r *Recipe) { r.Args[1] = "4" },
			[]Change{{Path: "args[--tp]", Old: "8", New: "4", Thing: "args --tp"}}},
		// A flag added, one removed.
		{"flag added and removed", func(r *Recipe) { r.Args = []string{"--tp", "8", "--max-num-seqs", "512"} },
			[]Change{{Path: "args[--max-num-seqs]", New: "512", Thing: "args --max-num-seqs"},
				{Path: "args[--prefix-caching]", Old: "set", Thing: "args --prefix-caching"}}},
		// Nodes and GPUs per node are one thing, the layout.
		{"layout", func(r *Recipe) { r.Nodes, r.GPUsPerNode = 4, 4 },
			[]Change{{Path: "nodes", Old: "2", New: "4", Thing: "layout"}, {Path: "gpus_per_node", Old: "8", New: "4", Thing: "layout"}}},
		// Price, name and deploy do not count.
		{"price name deploy", func(r *Recipe) {
			r.Name, r.USDPerGPUHour = "r1", 2
			r.Deploy = Deploy{Type: DeployKubernetes, Kubernetes: &KubernetesSpec{Manifests: []string{"a.yaml"}}}
		}, []Change{{Path: "name", Old: "r0", New: "r1"}, {Path: "usd_per_gpu_hour", Old: "1.8", New: "2"},
			{Path: "deploy.kubernetes.manifests", New: `["a.yaml"]`}, {Path: "deploy.type", New: "kubernetes"}}},
		// An image bump is an engine change.
		{"image", func(r *Recipe) { r.Image = "vllm:2" }, []Change{{Path: "image", Old: "vllm:1", New: "vllm:2", Thing: "engine"}}},
		// A negative number is a flag's value, not a flag.
		{"negative value", func(r *Recipe) { r.Args = append(r.Args, "--seed", "-1") },
			[]Change{{Path: "args[--seed]", New: "-1", Thing: "args --seed"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := base()
			b.Args = slices.Clone(b.Args)
			c.change(&b)
			got := Diff(base(), b)
			if !slices.Equal(got, c.want) {
				t.Errorf("Diff =\n  %+v\nwant\n  %+v", got, c.want)
			}
		})
	}
}

func TestLint(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Recipe)
		want   []string // the Field of each warning, in order
	}{
		// One change, parent named: clean.
		{"one change", func(r *Recipe) { r.Name, r.Parent, r.Copies = "r1", "r0", 2 }, nil},
		// A price change alongside one change is still one change.
		{"one change and a price", func(r *Recipe) { r.Name, r.Parent, r.Copies, r.USDPerGPUHour = "r1", "r0", 2, 3 }, nil},
		// Two things: engine and layout.
		{"two things", func(r *Recipe) { r.Name, r.Parent, r.Engine, r.Nodes = "r1", "r0", "sglang", 4 }, []string{"recipe"}},
		// Nothing counts.
		{"no change", func(r *Recipe) { r.Name, r.Parent = "r1", "r0" }, []string{"recipe"}},
		// No parent named, and the same name as the parent.
		{"no parent same name", func(r *Recipe) { r.Copies = 2 }, []string{"parent", "name"}},
		// A parent named differently.
		{"other parent", func(r *Recipe) { r.Name, r.Parent, r.Copies = "r1", "r9", 2 }, []string{"parent"}},
		// A parent given as a file is not compared by name.
		{"parent file", func(r *Recipe) { r.Name, r.Parent, r.Copies = "r1", "r0.yaml", 2 }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := base()
			c.change(&b)
			var got []string
			for _, w := range Lint(b, base()) {
				got = append(got, w.Field)
				if w.Message == "" {
					t.Errorf("warning on %s has no message", w.Field)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("Lint fields = %v, want %v (%v)", got, c.want, Lint(b, base()))
			}
		})
	}
}

func TestDiffTextOfFiles(t *testing.T) {
	a, err := Load("testdata/recipe-0.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load("testdata/recipe-1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := DiffText(a, b)
	for _, want := range []string{
		"recipe diff: recipe-0-vllm -> recipe-1-seqs",
		"args[--max-num-seqs]", "256", "512", "(changes args --max-num-seqs)",
		"usd_per_gpu_hour", "(does not count)",
		"1 thing changed: args --max-num-seqs",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("DiffText lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "tensor-parallel") {
		t.Errorf("DiffText shows an unchanged, reordered flag:\n%s", got)
	}
	if ws := Lint(b, a); len(ws) != 0 {
		t.Errorf("Lint of a one-change candidate = %v", ws)
	}
	if got := DiffText(a, a); !strings.Contains(got, "no differences") {
		t.Errorf("DiffText(a, a) = %q", got)
	}
}

// TestEngineChangeCarriesItsFlags: vLLM -> SGLang needs SGLang's spelling of
// the flags; that is one change, while a flag changed on the same engine
// counts on its own.
func TestEngineChangeCarriesItsFlags(t *testing.T) {
	v := Recipe{Name: "a", Engine: "vllm", Args: []string{"--max-model-len", "524288"}}
	s := Recipe{Name: "b", Engine: "sglang", Args: []string{"--context-length", "524288", "--enable-metrics"}}
	if got := Things(Diff(v, s)); len(got) != 1 || got[0] != "engine" {
		t.Errorf("engine change with its flags: things %v, want [engine]", got)
	}
	v2 := v
	v2.Args = []string{"--max-model-len", "131072"}
	if got := Things(Diff(v, v2)); len(got) != 1 || got[0] != "args --max-model-len" {
		t.Errorf("a flag on the same engine: things %v", got)
	}
}
