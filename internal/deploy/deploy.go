// Package deploy puts a recipe up, waits until it serves, and always puts the
// previous recipe back: deployers for an endpoint that is already serving
// (none), Kubernetes manifests (kubernetes) and the user's own commands
// (command).
package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/recipe"
)

// Deployer puts a recipe up and the previous one back.
type Deployer interface {
	// Deploy puts the recipe up and returns once it is ready and its endpoint
	// lists the model. On error, part of it may be up: call Rollback.
	Deploy(ctx context.Context) error
	// Ready waits until what is deployed now is ready and serving.
	Ready(ctx context.Context) error
	// Rollback puts back what was there before Deploy and waits until it
	// serves again. It is safe after a failed or interrupted Deploy, and a
	// no-op when Deploy never ran. A failure is a *RollbackError.
	Rollback(ctx context.Context) error
}

// Defaults for a recipe's deploy section.
const (
	DefaultReadyTimeout    = 30 * time.Minute
	DefaultRollbackTimeout = 30 * time.Minute
	DefaultPoll            = 5 * time.Second
)

// Options are what every deployer shares.
type Options struct {
	// Endpoint is the base URL (without /v1) whose /v1/models must list Model.
	Endpoint string
	Model    string
	// ReadyTimeout bounds Deploy and Ready (DefaultReadyTimeout when 0).
	ReadyTimeout time.Duration
	// Poll is how often readiness is checked (DefaultPoll when 0).
	Poll time.Duration
	// HTTP is the client for endpoint probes; nil uses one with a 10 s timeout.
	HTTP *http.Client
	// Log receives one line per step taken; nil discards.
	Log io.Writer
}

func (o Options) withDefaults() Options {
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

func (o Options) logf(format string, args ...any) {
	fmt.Fprintf(o.Log, "deploy: "+format+"\n", args...)
}

// Env is the process state a deployer may use, passed in by the command.
type Env struct {
	// Stdout and Stderr receive the output of deploy commands; nil discards.
	Stdout, Stderr io.Writer
	// Environ is the environment deploy commands run with (os.Environ()).
	Environ []string
	// Endpoint overrides the recipe's endpoint, e.g. with the built-in
	// simulator's address; empty keeps the recipe's.
	Endpoint string
	// HTTP is the client for endpoint probes; nil uses a default.
	HTTP *http.Client
	// Log receives progress lines; nil discards.
	Log io.Writer
}

// New makes the deployer a recipe's deploy section names. The kubernetes
// deployer reads its manifests and connects to the cluster here (from the
// kubeconfig the recipe names, $KUBECONFIG, ~/.kube/config or the in-cluster
// service account), and checks every object's kind is served before anything
// is applied.
func New(r recipe.Recipe, env Env) (Deployer, error) {
	o := OptionsFor(r, env)
	switch r.Deploy.Type {
	case "", recipe.DeployNone:
		return &None{Options: o}, nil
	case recipe.DeployKubernetes:
		k := r.Deploy.Kubernetes
		if k == nil {
			return nil, errors.New("deploy.kubernetes: missing; list the manifests to apply")
		}
		paths := make([]string, len(k.Manifests))
		for i, m := range k.Manifests {
			paths[i] = r.Path(m)
		}
		objs, err := ReadManifests(paths...)
		if err != nil {
			return nil, err
		}
		client, mapper, err := Connect(k.Kubeconfig, k.Context)
		if err != nil {
			return nil, err
		}
		return NewKubernetes(KubernetesConfig{
			Client: client, Mapper: mapper, Objects: objs, Namespace: k.Namespace, Ready: k.Ready, Options: o,
		})
	case recipe.DeployCommand:
		c := r.Deploy.Command
		if c == nil {
			return nil, errors.New("deploy.command: missing; give the deploy and undeploy commands")
		}
		environ := append(append([]string(nil), env.Environ...),
			"HEADROOM_RECIPE="+r.Name, "HEADROOM_PARENT="+r.Parent, "HEADROOM_ENDPOINT="+o.Endpoint, "HEADROOM_MODEL="+o.Model)
		return &Command{
			DeployArgv: c.Deploy, UndeployArgv: c.Undeploy, ReadyURL: c.ReadyURL, Dir: r.Dir,
			Environ: environ, Stdout: env.Stdout, Stderr: env.Stderr, Options: o,
		}, nil
	}
	return nil, fmt.Errorf("deploy.type: unknown deployer %q (known: none, kubernetes, command)", r.Deploy.Type)
}

// OptionsFor turns a recipe's endpoint, model and deploy timings into Options.
func OptionsFor(r recipe.Recipe, env Env) Options {
	o := Options{
		Endpoint:     r.Endpoint,
		Model:        r.Model,
		ReadyTimeout: seconds(r.Deploy.ReadyTimeoutS),
		Poll:         seconds(r.Deploy.PollS),
		HTTP:         env.HTTP,
		Log:          env.Log,
	}
	if env.Endpoint != "" {
		o.Endpoint = env.Endpoint
	}
	return o.withDefaults()
}

// RollbackTimeout is how long a recipe's rollback may take.
func RollbackTimeout(r recipe.Recipe) time.Duration {
	if d := seconds(r.Deploy.RollbackTimeoutS); d > 0 {
		return d
	}
	return DefaultRollbackTimeout
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Within deploys with d, runs body on the deployed recipe, and always rolls
// back: when body returns, when Deploy or body fails, and when ctx is
// cancelled (an interrupt). Rollback runs on a fresh context bounded by
// rollbackTimeout, so the interrupt that ended the run cannot cut it short.
// The error joins what went wrong in the run with the rollback's error; a
// failed rollback can be found with errors.As(err, **RollbackError).
func Within(ctx context.Context, d Deployer, rollbackTimeout time.Duration, body func(context.Context) error) error {
	runErr := d.Deploy(ctx)
	if runErr != nil {
		runErr = fmt.Errorf("deploy: %w", runErr)
	} else {
		runErr = body(ctx)
	}
	if rollbackTimeout <= 0 {
		rollbackTimeout = DefaultRollbackTimeout
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	return errors.Join(runErr, d.Rollback(rctx))
}

// RollbackError is a rollback that did not put everything back. Left lists
// what is not as it was, one line each, so an operator can fix it by hand.
type RollbackError struct {
	Left []string
}

func (e *RollbackError) Error() string {
	return "ROLLBACK FAILED: the previous recipe is not fully back; fix these by hand:\n  " + strings.Join(e.Left, "\n  ")
}

// None is the deployer for an endpoint that is already serving: Deploy and
// Ready wait until it lists the model; Rollback has nothing to undo.
type None struct {
	Options Options
}

// Deploy waits until the endpoint serves the model.
func (n *None) Deploy(ctx context.Context) error { return n.Ready(ctx) }

// Ready waits until the endpoint serves the model.
func (n *None) Ready(ctx context.Context) error {
	o := n.Options.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	return WaitServing(ctx, o.HTTP, o.Endpoint, o.Model, o.Poll)
}

// Rollback does nothing: nothing was deployed.
func (n *None) Rollback(ctx context.Context) error { return nil }
