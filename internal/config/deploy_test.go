package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	k8syaml "sigs.k8s.io/yaml"
)

func TestNotifyGitHubAndPromote(t *testing.T) {
	base := string(defaultYAML)
	// kube turns the default recipe into one the kubernetes deployer puts up.
	kube := func(s string) string {
		return strings.Replace(s, "  sim:\n    profile: default\n",
			"  sim:\n    profile: default\n  deploy:\n    type: kubernetes\n    kubernetes:\n      manifests: [deploy.yaml]\n", 1)
	}
	cases := []struct {
		name string
		yaml string
		ovs  []Override
		want []string // substrings of the error; none: valid
	}{
		// A PR comment needs the repository, the PR and the token's variable.
		{name: "github ok", yaml: base + "notify:\n  github: {repo: acme/serving, pr: 12}\n"},
		{name: "github from --set", yaml: base, ovs: []Override{
			{Path: "notify.github.repo", Value: "acme/serving", Flag: "--set notify.github.repo"},
			{Path: "notify.github.pr", Value: "7", Flag: "--set notify.github.pr"}}},
		{name: "github bad repo", yaml: base + "notify:\n  github: {repo: serving, pr: 12}\n", want: []string{"notify.github.repo", "owner/name"}},
		{name: "github no pr", yaml: base + "notify:\n  github: {repo: acme/serving}\n", want: []string{"notify.github.pr"}},
		// The token's variable, never the token.
		{name: "github token in token_env", yaml: base + "notify:\n  github: {repo: acme/serving, pr: 1, token_env: 'ghp_abc-123'}\n", want: []string{"notify.github.token_env", "never the token"}},
		{name: "github bad api", yaml: base + "notify:\n  github: {repo: acme/serving, pr: 1, api: 'ghe.example/api/v3'}\n", want: []string{"notify.github.api"}},
		// Promote: only on_target or never, only with a kubernetes deployer and a target.
		{name: "promote ok", yaml: kube(base) + "deploy:\n  promote: on_target\n"},
		{name: "promote never", yaml: base + "deploy:\n  promote: never\n"},
		{name: "promote typo", yaml: kube(base) + "deploy:\n  promote: always\n", want: []string{"deploy.promote", "never or on_target"}},
		{name: "promote without kubernetes", yaml: base + "deploy:\n  promote: on_target\n", want: []string{"deploy.promote", "kubernetes", `"none"`}},
		{name: "promote without target", yaml: strings.Replace(kube(base), "  target: 8\n", "", 1) + "deploy:\n  promote: on_target\n", want: []string{"deploy.promote", "sweep.target"}},
		{name: "compare missing dir", yaml: kube(base) + "deploy:\n  promote: on_target\n  compare: [/nonexistent/run]\n", want: []string{"deploy.compare[0]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseWith([]byte(c.yaml), "test.yaml", c.ovs...)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if r.Notify.GitHub != nil && r.Notify.GitHub.TokenEnv != "GITHUB_TOKEN" {
					t.Errorf("token_env default = %q, want GITHUB_TOKEN", r.Notify.GitHub.TokenEnv)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestCIExample checks examples/ci: the workflow decodes, runs smoke on
// every recipe pull request and the full run on the label, and every
// --set it passes gives a valid run file on top of examples/ci/run.yaml.
func TestCIExample(t *testing.T) {
	b, err := os.ReadFile("../../examples/ci/headroom.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On   map[string]any `json:"on"`
		True map[string]any `json:"true"` // YAML 1.1 reads the key on as true
		Jobs map[string]struct {
			If    string `json:"if"`
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := k8syaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if wf.On == nil {
		wf.On = wf.True
	}
	if _, ok := wf.On["pull_request"]; !ok {
		t.Error("the workflow does not run on pull requests")
	}
	want := map[string]string{"smoke": "headroom smoke", "full": "headroom run"}
	sets := regexp.MustCompile(`--set ([a-z_.]+)=`)
	values := map[string]string{"recipe.file": "", "notify.github.repo": "acme/serving-recipes", "notify.github.pr": "17", "deploy.promote": "on_target"}
	recipeFile, _ := filepath.Abs("../../examples/recipes/0-vllm.yaml")
	values["recipe.file"] = recipeFile
	for job, cmd := range want {
		j, ok := wf.Jobs[job]
		if !ok {
			t.Errorf("no %s job", job)
			continue
		}
		var run string
		for _, s := range j.Steps {
			run += s.Run
		}
		if !strings.Contains(run, cmd) {
			t.Errorf("job %s does not run %q", job, cmd)
		}
		var ovs []Override
		for _, m := range sets.FindAllStringSubmatch(run, -1) {
			v, ok := values[m[1]]
			if !ok {
				t.Errorf("job %s sets %s, which this test has no value for", job, m[1])
				continue
			}
			ovs = append(ovs, Override{Path: m[1], Value: v, Flag: "--set " + m[1]})
		}
		r, err := LoadWith("../../examples/ci/run.yaml", ovs...)
		if err != nil {
			t.Errorf("job %s: examples/ci/run.yaml with its --set: %v", job, err)
			continue
		}
		if g := r.Notify.GitHub; g == nil || g.PR != 17 || g.Repo != "acme/serving-recipes" {
			t.Errorf("job %s: notify.github = %+v, want the pull request set", job, g)
		}
		if r.Recipe.Name != "recipe-0-vllm" {
			t.Errorf("job %s: recipe %q, want the changed recipe's", job, r.Recipe.Name)
		}
	}
	if !strings.Contains(wf.Jobs["full"].If, "label") || strings.Contains(wf.Jobs["smoke"].If, "label.name") {
		t.Errorf("the full run is not on a label (%q) or smoke is (%q)", wf.Jobs["full"].If, wf.Jobs["smoke"].If)
	}
}
