package report

import (
	"os"
	"slices"
	"testing"
)

// TestRecordFilesSkipNoShard: a shard that wrote no records file (no
// lanes, or lost before its first record) does not hide the shards after
// it; shards come in number order (10 after 9), and a file that only
// looks like one is not read.
func TestRecordFilesSkipNoShard(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"records.jsonl", "records-shard-1.jsonl", "records-shard-3.jsonl", "records-shard-10.jsonl", "records-shard-9.jsonl", "records-shard-02.jsonl"} {
		if err := os.WriteFile(d.File(name), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"records.jsonl", "records-shard-1.jsonl", "records-shard-3.jsonl", "records-shard-9.jsonl", "records-shard-10.jsonl"}
	if got := d.RecordFiles(); !slices.Equal(got, want) {
		t.Errorf("RecordFiles() = %v, want %v", got, want)
	}
}
