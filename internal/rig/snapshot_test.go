package rig

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"sigs.k8s.io/yaml"
)

// dirFiles is every file of a directory with its contents.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(dir + "/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// A --resume that fails pre-flight changes nothing on disk: not the
// summary (which it rewrote with no steps), not the torn lines the repair
// would cut, no file made.
func TestFailedResumeChangesNothing(t *testing.T) {
	d := killedRun(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	cfg := config.Default()
	cfg.Recipe.Endpoint, cfg.Recipe.Metrics, cfg.TimeScale = refused, []string{refused + "/metrics"}, 1
	cfg.Sweep.ReadyTimeoutS = 1
	b, err := yaml.Marshal(cfg.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("config.yaml", b); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteJSON("summary.json", map[string]any{"version": 2, "steps": []map[string]int{{"index": 0, "sessions": 2}}}); err != nil {
		t.Fatal(err)
	}
	before := dirFiles(t, d.Path())
	sum, err := Run(context.Background(), Options{Config: config.Default(), Resume: d})
	if err == nil {
		t.Fatal("the resume against a refused endpoint did not fail")
	}
	t.Logf("resume failed: %v", err)
	after := dirFiles(t, d.Path())
	for name, was := range before {
		if now, ok := after[name]; !ok {
			t.Errorf("%s is gone", name)
		} else if now != was {
			t.Errorf("%s changed:\nwas %q\nnow %q", name, was, now)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("the failed resume left %s behind", name)
		}
	}
	if sum.Error == "" {
		t.Error("the summary returned does not say why the resume failed")
	}
}
