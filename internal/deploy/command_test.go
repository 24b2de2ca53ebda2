package deploy

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/recipe"
)

// commandRig is a gateway whose state is a file the deploy commands write:
// it lists the model unless the file says "down", and its ready URL answers
// 200 unless the file says "broken".
type commandRig struct {
	state string
	srv   *httptest.Server
}

func newCommandRig(t *testing.T) *commandRig {
	r := &commandRig{state: filepath.Join(t.TempDir(), "state")}
	os.WriteFile(r.state, []byte("parent\n"), 0o644)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s := r.read()
		switch {
		case req.URL.Path == "/ready" && s == "broken":
			http.Error(w, "crashloop", http.StatusServiceUnavailable)
		case req.URL.Path == "/ready":
		case s == "down":
			http.Error(w, "no upstream", http.StatusBadGateway)
		default:
			w.Write([]byte(`{"data":[{"id":"glm"}]}`))
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *commandRig) read() string {
	b, _ := os.ReadFile(r.state)
	return strings.TrimSpace(string(b))
}

func TestCommandDeployer(t *testing.T) {
	cases := []struct {
		name     string
		deploy   string
		undeploy string
		body     func(r *commandRig) error
		interupt bool
		want     []string // substrings of Within's error; none for success
		final    string   // state after Within
	}{
		// Deploy, run, undeploy: the run saw the candidate, production is back.
		{name: "success", deploy: "echo candidate > $STATE", undeploy: "echo parent > $STATE",
			body: func(r *commandRig) error {
				if s := r.read(); s != "candidate" {
					return errors.New("run saw " + s)
				}
				return nil
			}, final: "parent"},
		// A failing deploy command: its error, then the undeploy anyway.
		{name: "deploy fails", deploy: "echo half > $STATE; exit 3", undeploy: "echo parent > $STATE",
			want: []string{"deploy command", "exit status 3"}, final: "parent"},
		// Never ready: the ready URL keeps failing until the deadline.
		{name: "never ready", deploy: "echo broken > $STATE", undeploy: "echo parent > $STATE",
			want: []string{"readiness probe not answering (timed out)", "503"}, final: "parent"},
		// An interrupt during a slow deploy kills it; the undeploy still runs.
		{name: "interrupt", deploy: "exec sleep 30", undeploy: "echo parent > $STATE", interupt: true,
			want: []string{"interrupted"}, final: "parent"},
		// The undeploy fails: a loud RollbackError.
		{name: "undeploy fails", deploy: "echo candidate > $STATE", undeploy: "exit 1",
			want: []string{"ROLLBACK FAILED", "undeploy command", "may still be deployed"}, final: "candidate"},
		// The undeploy runs but production does not come back.
		{name: "not back", deploy: "echo candidate > $STATE", undeploy: "echo down > $STATE",
			want: []string{"ROLLBACK FAILED", "endpoint not serving"}, final: "down"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rig := newCommandRig(t)
			var out bytes.Buffer
			d := &Command{
				DeployArgv: []string{"sh", "-c", c.deploy}, UndeployArgv: []string{"sh", "-c", c.undeploy},
				ReadyURL: rig.srv.URL + "/ready", Environ: []string{"STATE=" + rig.state, "PATH=" + os.Getenv("PATH")},
				Stdout: &out, Stderr: &out,
				Options: Options{Endpoint: rig.srv.URL, Model: "glm", ReadyTimeout: 200 * time.Millisecond, Poll: 5 * time.Millisecond, HTTP: rig.srv.Client()},
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.interupt {
				time.AfterFunc(100*time.Millisecond, cancel)
			}
			err := Within(ctx, d, 5*time.Second, func(context.Context) error {
				if c.body != nil {
					return c.body(rig)
				}
				return nil
			})
			if len(c.want) == 0 && err != nil {
				t.Errorf("Within: %v", err)
			}
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
			if got := rig.read(); got != c.final {
				t.Errorf("state after the run = %q, want %q", got, c.final)
			}
		})
	}
}

func TestNewFromRecipe(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "md.yaml")
	os.WriteFile(manifest, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\n"), 0o644)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`), 0o600)
	cases := []struct {
		name string
		r    recipe.Recipe
		want string // the deployer's type, or an error substring
	}{
		// No deploy section: the endpoint is already serving.
		{"none", recipe.Recipe{Endpoint: "http://x", Model: "m"}, "*deploy.None"},
		// Kubernetes: manifests read relative to the recipe's folder; the
		// client is made from the kubeconfig without contacting the cluster.
		{"kubernetes", recipe.Recipe{Dir: dir, Deploy: recipe.Deploy{Type: "kubernetes",
			Kubernetes: &recipe.KubernetesSpec{Manifests: []string{"md.yaml"}, Kubeconfig: kubeconfig}}}, "*deploy.Kubernetes"},
		// A missing manifest is named.
		{"missing manifest", recipe.Recipe{Dir: dir, Deploy: recipe.Deploy{Type: "kubernetes",
			Kubernetes: &recipe.KubernetesSpec{Manifests: []string{"nope.yaml"}, Kubeconfig: kubeconfig}}}, "nope.yaml"},
		// A kubeconfig context that does not exist.
		{"bad context", recipe.Recipe{Dir: dir, Deploy: recipe.Deploy{Type: "kubernetes",
			Kubernetes: &recipe.KubernetesSpec{Manifests: []string{"md.yaml"}, Kubeconfig: kubeconfig, Context: "prod"}}}, "prod"},
		// Command.
		{"command", recipe.Recipe{Deploy: recipe.Deploy{Type: "command", Command: &recipe.CommandSpec{Deploy: []string{"true"}, Undeploy: []string{"true"}}}}, "*deploy.Command"},
		// Unknown.
		{"unknown", recipe.Recipe{Deploy: recipe.Deploy{Type: "helm"}}, "unknown deployer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := New(c.r, Env{})
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = typeName(d)
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("New = %q, want %q", got, c.want)
			}
		})
	}
	if got := RollbackTimeout(recipe.Recipe{Deploy: recipe.Deploy{RollbackTimeoutS: 90}}); got != 90*time.Second {
		t.Errorf("RollbackTimeout = %v", got)
	}
	o := OptionsFor(recipe.Recipe{Endpoint: "http://a", Model: "m", Deploy: recipe.Deploy{ReadyTimeoutS: 60, PollS: 1}}, Env{Endpoint: "http://sim"})
	if o.Endpoint != "http://sim" || o.ReadyTimeout != time.Minute || o.Poll != time.Second {
		t.Errorf("OptionsFor = %+v", o)
	}
}

func typeName(d Deployer) string {
	switch d.(type) {
	case *None:
		return "*deploy.None"
	case *Kubernetes:
		return "*deploy.Kubernetes"
	case *Command:
		return "*deploy.Command"
	}
	return "?"
}
