package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
)

// recommend wires the space file, the outputs and the exit code: a space
// whose every candidate is over its constraint simulates nothing, lists
// each as skipped with the reason, writes the page, and exits 2 (no
// candidate holds the target).
func TestRecommendCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "base.yaml"), config.DefaultYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	space := filepath.Join(dir, "space.yaml")
	text := "version: 1\nbase: base.yaml\ntarget: 8\nconstraints: {max_gpus: 8}\naxes:\n  - {path: recipe.copies, values: [1, 2]}\n"
	if err := os.WriteFile(space, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "rec.html")
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"recommend", "-f", space, "--html", page, "--output", dir}, &out, &errOut)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("exit %v, want exit status 2\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"copies=1", "copies=2", "skipped", "16 GPUs is over constraints.max_gpus (8)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "candidate 2 of 2 (copies=2): skipped") {
		t.Errorf("progress lacks candidate 2's line:\n%s", errOut.String())
	}
	if b, err := os.ReadFile(page); err != nil || !bytes.Contains(b, []byte("<!DOCTYPE html>")) {
		t.Errorf("--html wrote no page (%v)", err)
	}

	out.Reset()
	if err := run(context.Background(), []string{"recommend"}, &out, &out); err == nil || !strings.Contains(err.Error(), "-f SPACE.yaml") {
		t.Errorf("no space file: %v, want the flag named", err)
	}
}
