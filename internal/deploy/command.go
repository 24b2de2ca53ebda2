package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Command deploys with the user's own commands: DeployArgv puts the recipe
// up, UndeployArgv puts the previous one back. Readiness is ReadyURL
// answering 2xx (when set), then the endpoint listing the model.
type Command struct {
	DeployArgv, UndeployArgv []string
	ReadyURL                 string
	// Dir is the folder the commands run in; empty is the current one.
	Dir string
	// Environ is the commands' environment.
	Environ []string
	// Stdout and Stderr receive the commands' output; nil discards.
	Stdout, Stderr io.Writer
	Options        Options

	mu           sync.Mutex
	deployed     bool // the deploy command was started: Rollback has work to do
	servedBefore bool
}

// Deploy runs the deploy command and waits until the recipe serves.
func (c *Command) Deploy(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deployed {
		return errors.New("already deployed: roll back before deploying again")
	}
	o := c.Options.withDefaults()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c.servedBefore = Serving(pctx, o.HTTP, o.Endpoint, o.Model) == nil
	cancel()
	c.deployed = true
	if err := c.exec(ctx, "deploy", c.DeployArgv); err != nil {
		return err
	}
	return c.wait(ctx)
}

// Ready waits until ReadyURL answers 2xx and the endpoint lists the model.
func (c *Command) Ready(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wait(ctx)
}

// Rollback runs the undeploy command and, if the endpoint served before the
// deploy, waits until it serves again. A no-op when Deploy never ran.
func (c *Command) Rollback(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.deployed {
		return nil
	}
	if err := c.exec(ctx, "undeploy", c.UndeployArgv); err != nil {
		return &RollbackError{Left: []string{err.Error() + "; the candidate may still be deployed"}}
	}
	if c.servedBefore {
		if err := c.wait(ctx); err != nil {
			return &RollbackError{Left: []string{"after the undeploy command: " + err.Error()}}
		}
	}
	c.deployed = false
	return nil
}

func (c *Command) wait(ctx context.Context) error {
	o := c.Options.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	if c.ReadyURL != "" {
		if err := waitOK(ctx, o.HTTP, c.ReadyURL, o.Poll); err != nil {
			return err
		}
	}
	return WaitServing(ctx, o.HTTP, o.Endpoint, o.Model, o.Poll)
}

func (c *Command) exec(ctx context.Context, what string, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("no %s command; set deploy.command.%s", what, what)
	}
	o := c.Options.withDefaults()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = c.Environ
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr // nil is /dev/null
	cmd.WaitDelay = 10 * time.Second
	o.logf("running %s command: %s", what, strings.Join(argv, " "))
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s command %q %s: %w", what, strings.Join(argv, " "), why(ctx.Err()), ctx.Err())
		}
		return fmt.Errorf("%s command %q failed: %v (its output is above)", what, strings.Join(argv, " "), err)
	}
	return nil
}

// waitOK polls url until it answers 2xx or ctx is done.
func waitOK(ctx context.Context, client *http.Client, url string, poll time.Duration) error {
	var last error
	for {
		err := probe(ctx, client, url)
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err // keep the last answer, not the probe the deadline cut
		}
		if err := sleep(ctx, poll); err != nil {
			return fmt.Errorf("readiness probe not answering (%s): %w", why(err), last)
		}
	}
}

func probe(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("ready_url %q: %v", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %v", url, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
