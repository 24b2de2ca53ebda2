package transport

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// TestRedactWriterSerializesWrites: a run's progress writer is written by
// its own log lines and, at once, by the goroutines copying its shard
// processes' output (go test -race found two writes racing on the buffer
// under it in TestFourShardsMatchOneProcess). Every line must arrive whole,
// none lost, and the secret redacted in each.
func TestRedactWriterSerializesWrites(t *testing.T) {
	var buf bytes.Buffer
	r := &Redactor{}
	r.Add("s3cret-token")
	w := r.Writer(&buf)
	const writers, lines = 8, 500
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range lines {
				if _, err := w.Write([]byte("shard: token s3cret-token sent\n")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	want := strings.Repeat("shard: token "+Redacted+" sent\n", writers*lines)
	if got := buf.String(); got != want {
		t.Errorf("got %d bytes (%d lines) from %d concurrent writes, want %d bytes, each line whole and redacted", len(got), strings.Count(got, "\n"), writers*lines, len(want))
	}
}
