package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/deploy"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// promoter is a deployer that records what it was asked to do.
type promoter struct {
	calls      []string
	promoteErr error
}

func (p *promoter) Deploy(context.Context) error   { p.calls = append(p.calls, "deploy"); return nil }
func (p *promoter) Ready(context.Context) error    { p.calls = append(p.calls, "ready"); return nil }
func (p *promoter) Rollback(context.Context) error { p.calls = append(p.calls, "rollback"); return nil }
func (p *promoter) Promote(_ context.Context, id string) error {
	p.calls = append(p.calls, "promote "+id)
	return p.promoteErr
}

// promoteRunDir writes a finished run of a kubernetes recipe whose target
// of 8 sessions read v.
func promoteRunDir(t *testing.T, v verdict.Verdict) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "runs", "cand", "20260104T000000Z")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(config.DefaultYAML()), "  sim:\n    profile: default\n",
		"  sim:\n    profile: default\n  deploy:\n    type: kubernetes\n    kubernetes:\n      manifests: [deploy.yaml]\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	usd, lo, hi := 3.0, 2.8, 3.2
	s := report.Summary{Version: report.SummaryVersion, Recipe: report.Recipe{Name: "cand"}, RunDir: dir,
		Bar: verdict.Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02}, Target: &sweep.TargetVerdict{Sessions: 8, Verdict: v}}
	s.Cost.USDPerSessionHour, s.Cost.USDPerSessionHourLo, s.Cost.USDPerSessionHourHi = &usd, &lo, &hi
	b, _ := json.Marshal(s)
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPromoteCommand(t *testing.T) {
	cases := []struct {
		name       string
		verdict    verdict.Verdict
		args       []string
		promoteErr error
		wantErr    bool
		calls      string // what the deployer was asked, in order
		out        string // in stdout
	}{
		// Held the target, nothing cheaper: deployed again and kept, never rolled back.
		{name: "promoted", verdict: verdict.Pass, calls: "deploy ready promote cand/20260104T000000Z", out: "kept and labelled headroom.dev/promoted=cand-20260104T000000Z"},
		// --dry-run decides and deploys nothing.
		{name: "dry run", verdict: verdict.Pass, args: []string{"--dry-run"}, calls: "", out: "promoted: held the target of 8 sessions at $3.00"},
		// Too close never promotes: nothing is deployed, the exit is 1.
		{name: "too close", verdict: verdict.TooClose, wantErr: true, calls: "", out: "reads too_close"},
		// The label fails: the previous recipe is put back.
		{name: "label fails", verdict: verdict.Pass, promoteErr: errors.New("forbidden"), wantErr: true, calls: "deploy ready promote cand/20260104T000000Z rollback"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := promoteRunDir(t, c.verdict)
			fake := &promoter{promoteErr: c.promoteErr}
			var out, errOut bytes.Buffer
			cmd := promoteCmdWith(&out, &errOut, func(r recipe.Recipe, _ deploy.Env) (deploy.Deployer, error) {
				if r.Deploy.Type != recipe.DeployKubernetes {
					t.Errorf("deployer asked for %q", r.Deploy.Type)
				}
				return fake, nil
			})
			cmd.SetArgs(append([]string{dir}, c.args...))
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.ExecuteContext(context.Background())
			if (err != nil) != c.wantErr {
				t.Errorf("err %v, want an error %v", err, c.wantErr)
			}
			if got := strings.Join(fake.calls, " "); got != c.calls {
				t.Errorf("deployer calls %q, want %q", got, c.calls)
			}
			if !strings.Contains(out.String(), c.out) {
				t.Errorf("stdout %q lacks %q", out.String(), c.out)
			}
		})
	}
}
