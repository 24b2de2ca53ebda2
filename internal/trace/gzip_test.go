package trace

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"
)

// A gzipped trace cut short names the line it broke on and says gzip,
// where it said "unexpected EOF".
func TestTruncatedGzipSaysGzip(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	for i := range 400 {
		zw.Write([]byte(strings.Replace(tiny, `"id":"a"`, fmt.Sprintf(`"id":"t%d"`, i), 1) + "\n"))
	}
	zw.Close()
	whole := gz.Bytes()
	for _, cut := range []int{len(whole) / 2, len(whole) - 4} {
		_, err := Read(bytes.NewReader(whole[:cut]), "traces.jsonl.gz")
		t.Logf("cut at %d of %d: %v", cut, len(whole), err)
		if err == nil {
			t.Fatalf("a gzip stream cut at %d of %d bytes read without error", cut, len(whole))
		}
		msg := err.Error()
		if !strings.Contains(msg, "gzip") || !strings.Contains(msg, "truncated") || !strings.Contains(msg, "traces.jsonl.gz:") {
			t.Errorf("error %q does not say gzip, truncated and the line", msg)
		}
	}
}
