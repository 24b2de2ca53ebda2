package report

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A disk that fills mid-write leaves only whole lines behind (never a torn
// line that reads as a killed run), and the error names the file and why.
func TestJSONLFullDiskKeepsWholeLines(t *testing.T) {
	d, err := NewDir(t.TempDir(), "r", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	j, err := d.Append("steps.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	j.Write(map[string]int{"step": 1})
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(d.File("steps.jsonl"))
	d2, _ := OpenDir(d.Path())
	// room for a few bytes of the next line only
	d2.FailAfter(5, syscall.ENOSPC)
	j2, err := d2.Append("steps.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	j2.Write(map[string]int{"step": 2})
	err = j2.Flush()
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush on a full disk: %v, want a WriteError of ENOSPC", err)
	}
	if msg := err.Error(); !strings.Contains(msg, d.File("steps.jsonl")) || !strings.Contains(msg, "no space left on device") {
		t.Errorf("message %q names neither the file nor the cause", msg)
	}
	if j2.Err() == nil {
		t.Error("the write error did not stick")
	}
	j2.Close()
	got, _ := os.ReadFile(d.File("steps.jsonl"))
	if string(got) != string(whole) {
		t.Errorf("the file holds %q after the failed write, want its whole lines %q", got, whole)
	}
	var warned []string
	if err := ReadJSONL(d.File("steps.jsonl"), func(w string) { warned = append(warned, w) }, func([]byte) error { return nil }); err != nil || len(warned) > 0 {
		t.Errorf("read back: %v, warnings %q; want clean", err, warned)
	}
	// a whole file that does not fit is not written at all
	if err := d2.WriteJSON("summary.json", map[string]string{"capacity": "6"}); !errors.As(err, &we) {
		t.Errorf("WriteJSON on a full disk: %v, want a WriteError", err)
	}
	if _, err := os.Stat(d.File("summary.json")); !os.IsNotExist(err) {
		t.Errorf("summary.json exists after a failed write: %v", err)
	}
}
