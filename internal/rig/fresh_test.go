package rig

import (
	"reflect"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
)

// TestARepeatSynthesisesFreshSessions (issue 21.2): with synthesised
// traces, the sessions a repeat replays come from a fresh synthesis seed
// (other turns, ids marked with the epoch); a trace file has no fresh
// corpus to give.
func TestARepeatSynthesisesFreshSessions(t *testing.T) {
	w := config.Workload{Traces: "synth", SynthSessions: 40, Seed: 7}
	first, err := BuildSessions(w)
	if err != nil {
		t.Fatal(err)
	}
	fresh := FreshSessions(w)
	if fresh == nil {
		t.Fatal("no fresh corpus for synthesised traces")
	}
	again := fresh(1)
	for tier, ss := range first {
		if len(again[tier]) != len(ss) {
			t.Fatalf("tier %s: %d fresh sessions, want %d as the first corpus", tier, len(again[tier]), len(ss))
		}
		same := 0
		for i := range ss {
			if !strings.HasSuffix(again[tier][i].ID, ".r1") {
				t.Errorf("tier %s: fresh session %q is not marked with its epoch", tier, again[tier][i].ID)
			}
			if reflect.DeepEqual(ss[i].Turns, again[tier][i].Turns) {
				same++
			}
		}
		if same > 0 {
			t.Errorf("tier %s: %d of %d fresh sessions have the first corpus's turns", tier, same, len(ss))
		}
	}
	if !reflect.DeepEqual(fresh(1), again) {
		t.Error("the fresh corpus of one epoch is not reproducible")
	}
	if FreshSessions(config.Workload{Traces: "traces.jsonl"}) != nil {
		t.Error("a trace file has no fresh corpus to synthesise")
	}
}
