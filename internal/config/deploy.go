package config

import (
	"fmt"
	"os"
	"regexp"

	"github.com/headroom-bench/headroom/internal/recipe"
)

// GitHub names the pull request a run comments on, and the environment
// variable holding a token that may write its comments.
type GitHub struct {
	// Repo is owner/name.
	Repo string `json:"repo"`
	// PR is the pull request's number.
	PR int `json:"pr"`
	// TokenEnv names the variable holding the token (default GITHUB_TOKEN);
	// the token itself is never written anywhere.
	TokenEnv string `json:"token_env,omitempty"`
	// API is the REST API's base URL: https://api.github.com by default,
	// https://HOST/api/v3 for GitHub Enterprise Server.
	API string `json:"api,omitempty"`
}

// Promotion policies for deploy.promote.
const (
	PromoteNever    = "never"
	PromoteOnTarget = "on_target"
)

// Deploy is what a run does with the candidate when it is over.
type Deploy struct {
	// Promote is never (the default: the previous recipe is always put
	// back) or on_target: keep the candidate, labelled
	// headroom.dev/promoted=<run id>, when it held the target and was the
	// cheapest per session-hour among the runs compared.
	Promote string `json:"promote,omitempty"`
	// Compare lists the run directories of the recipes the candidate is
	// compared with; empty compares it with the latest run of its parent
	// recipe under output, when there is one.
	Compare []string `json:"compare,omitempty"`
}

// PromoteOn reports whether the run keeps a candidate that held its target.
func (d Deploy) PromoteOn() bool { return d.Promote == PromoteOnTarget }

var (
	repoName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$`)
	envName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// checkGitHub validates notify.github.
func (r Run) checkGitHub() []string {
	g := r.Notify.GitHub
	if g == nil {
		return nil
	}
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, "notify.github."+field+": "+fmt.Sprintf(format, args...))
	}
	if !repoName.MatchString(g.Repo) {
		bad("repo", "must be owner/name, e.g. acme/serving-recipes, got %q", g.Repo)
	}
	if g.PR < 1 {
		bad("pr", "must be the pull request's number (at least 1), got %d; in a workflow pass --set notify.github.pr=${{ github.event.pull_request.number }}", g.PR)
	}
	if g.TokenEnv != "" && !envName.MatchString(g.TokenEnv) {
		bad("token_env", "%q is not an environment variable's name: name the variable holding the token, never the token", g.TokenEnv)
	}
	if g.API != "" {
		if err := checkURL(g.API); err != nil {
			bad("api", "%v; e.g. https://github.example.com/api/v3", err)
		}
	}
	return errs
}

// checkDeploy validates deploy.
func (r Run) checkDeploy() []string {
	d := r.Deploy
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, "deploy."+field+": "+fmt.Sprintf(format, args...))
	}
	switch d.Promote {
	case "", PromoteNever:
	case PromoteOnTarget:
		if t := r.Recipe.Deploy.Type; t != recipe.DeployKubernetes {
			bad("promote", "on_target keeps and labels the candidate's objects, which only recipe.deploy.type kubernetes can do (it is %q)", typeOr(t))
		}
		if r.Sweep.Target == 0 {
			bad("promote", "on_target keeps the candidate only when it holds sweep.target; set sweep.target")
		}
	default:
		bad("promote", "must be never or on_target, got %q", d.Promote)
	}
	for i, dir := range d.Compare {
		st, err := os.Stat(dir)
		switch {
		case err != nil:
			bad(fmt.Sprintf("compare[%d]", i), "%v; list run directories (runs/<recipe>/<time>)", err)
		case !st.IsDir():
			bad(fmt.Sprintf("compare[%d]", i), "%s is not a run directory", dir)
		}
	}
	return errs
}

func typeOr(t string) string {
	if t == "" {
		return recipe.DeployNone
	}
	return t
}
