package rig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
)

// dirBytes is how many bytes the files of a run directory hold.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A disk that fills mid-run stops the run at the first failed write: exit
// 1 naming the file and the error, no step said that the directory does not
// hold, and `judge` on the directory agrees with what the run said.
func TestFullDiskStopsTheRun(t *testing.T) {
	cfg := shortRun(t, config.Virtual)
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.StepS = []int{2, 3, 4, 5}, 5, 120
	clean, err := Run(context.Background(), Options{Config: cfg})
	if err != nil {
		t.Fatalf("clean run: %v", err)
	}
	// the ladder's 4 steps (short steps hold too few turns to pass, so
	// the sweep then also looks below the lowest: one step at 1 session)
	if len(clean.Steps) < 4 {
		t.Fatalf("clean run judged %d steps, want the ladder's 4 at least", len(clean.Steps))
	}
	room := dirBytes(t, clean.RunDir) / 2
	cfg.Output = t.TempDir()
	var progress bytes.Buffer
	sum, err := Run(context.Background(), Options{Config: cfg, Progress: &progress,
		NewDir: func(root, recipe string, now time.Time) (*report.Dir, error) {
			d, err := report.NewDir(root, recipe, now)
			if err == nil {
				d.FailAfter(room, syscall.ENOSPC)
			}
			return d, err
		}})
	t.Logf("room %d bytes; error: %v", room, err)
	var we *report.WriteError
	if !errors.As(err, &we) || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), sum.RunDir) {
		t.Fatalf("run on a full disk returned %v; want the write error naming the file", err)
	}
	if code := ExitCodeOf(sum, err); code != ExitRigError {
		t.Errorf("exit code %d, want %d", code, ExitRigError)
	}
	if len(sum.Steps) == 0 || len(sum.Steps) >= len(clean.Steps) {
		t.Fatalf("the full-disk run kept %d steps of %d; want it to stop part way", len(sum.Steps), len(clean.Steps))
	}
	d, err := report.OpenDir(sum.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := ReadRun(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range saved.Warnings {
		if strings.Contains(w, "torn") {
			t.Errorf("the full disk reads as a kill: %s", w)
		}
	}
	if len(saved.Steps) != len(sum.Steps) {
		t.Errorf("the run said %d steps, the directory holds %d", len(sum.Steps), len(saved.Steps))
	}
	// every step the run printed is on disk, none beyond
	for i := range clean.Steps {
		said := strings.Contains(progress.String(), fmt.Sprintf("step %d: %d sessions  ", i+1, clean.Steps[i].Sessions))
		if said && i >= len(saved.Steps) {
			t.Errorf("step %d was printed but the directory does not hold it:\n%s", i+1, progress.String())
		}
	}
	judged, err := Judge(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if judged.Capacity.String() != sum.Capacity.String() {
		t.Errorf("judge says capacity %s, the run said %s", judged.Capacity, sum.Capacity)
	}
	for i := range sum.Steps {
		if i < len(judged.Steps) && judged.Steps[i].Verdict != sum.Steps[i].Verdict {
			t.Errorf("step %d: judge %s, run %s", i+1, judged.Steps[i].Verdict, sum.Steps[i].Verdict)
		}
	}
}
