package config

import (
	"strings"
	"testing"
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
