package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// helmPath finds helm, or skips the test saying how to get it.
func helmPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if gp, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		if p := filepath.Join(strings.TrimSpace(string(gp)), "bin", "helm"); fileExists(p) {
			return p
		}
	}
	t.Skip("helm not found, so helm lint and helm template were not run: go install helm.sh/helm/v3/cmd/helm@v3.22.0 (.ci/run does)")
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// helm runs helm with its caches and config in a temporary folder.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	return helmEnv(t, nil, args...)
}

// helmEnv runs helm with env added to its environment; the error holds
// what helm printed.
func helmEnv(t *testing.T, env []string, args ...string) ([]byte, error) {
	t.Helper()
	out, stderr, err := helmRun(t, env, args...)
	if err != nil {
		return out, fmt.Errorf("helm %s: %v: %s%s", strings.Join(args, " "), err, stderr, out)
	}
	return out, nil
}

// helmRun runs helm and gives its stdout and stderr apart.
func helmRun(t *testing.T, env []string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmPath(t), args...)
	home := t.TempDir()
	cmd.Env = append(append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data"), env...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	return out, errb.Bytes(), err
}

func template(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := helm(t, append([]string{"template", "headroom", chartDir, "--namespace", "headroom"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
