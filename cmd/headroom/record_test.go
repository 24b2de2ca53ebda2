package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/sim"
)

// TestRecordStatsAnonymisePlan runs `headroom record` in front of the
// simulator, drives four conversations through it (one with a subagent
// forked from its history), stops it as Ctrl-C would, and reads the
// recording with `traces stats`, `traces anonymise` and `plan` (which loads
// a run's workload exactly as `headroom run` does).
func TestRecordStatsAnonymisePlan(t *testing.T) {
	s, err := sim.New(sim.Options{Profile: sim.DefaultProfile(), Scale: 200, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl.gz")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"record", "--listen", "127.0.0.1:0", "--upstream", base, "-o", rec, "--stats-every", "0"}, &bytes.Buffer{}, &stderr)
	}()
	addr := ""
	re := regexp.MustCompile(`agents at (http://\S+)`)
	for deadline := time.Now().Add(10 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("record did not start: %s", stderr.String())
	}
	model := sim.DefaultProfile().Model
	for c := range 4 {
		words := func(tag string, n int) string {
			return strings.TrimSpace(strings.Repeat(fmt.Sprintf("c%d%s ", c, tag), n))
		}
		history := []map[string]any{{"role": "system", "content": words("sys", 100)}, {"role": "user", "content": words("task", 200)}}
		for turn := range 3 {
			chatTurn(t, addr, model, history)
			history = append(history, map[string]any{"role": "assistant", "content": words(fmt.Sprint("a", turn), 20)}, map[string]any{"role": "user", "content": words(fmt.Sprint("r", turn), 150)})
			if c == 0 && turn == 1 {
				fork := append(append([]map[string]any(nil), history[:2]...), map[string]any{"role": "user", "content": words("sub", 80)})
				chatTurn(t, addr, model, fork)
			}
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("record: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("record did not stop within 30 s of Ctrl-C")
	}
	if !strings.Contains(stderr.String(), "13 recorded; 4 traces written") {
		t.Errorf("record's summary: %s", stderr.String())
	}

	stats := func(path string) string {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"traces", "stats", "--json", path}, &out, &out); err != nil {
			t.Fatalf("traces stats %s: %v\n%s", path, err, out.String())
		}
		return out.String()
	}
	got := stats(rec)
	var st struct {
		Tiers []struct {
			Name          string  `json:"name"`
			Traces        int     `json:"traces"`
			Requests      int     `json:"requests"`
			WithSubagents float64 `json:"with_subagents"`
		} `json:"tiers"`
	}
	if err := json.Unmarshal([]byte(got), &st); err != nil {
		t.Fatal(err)
	}
	all := st.Tiers[len(st.Tiers)-1]
	if all.Name != "all" || all.Traces != 4 || all.Requests != 13 || all.WithSubagents != 0.25 {
		t.Errorf("stats of the recording: %+v, want 4 traces, 13 requests, a quarter with subagents", all)
	}

	anon := filepath.Join(dir, "anon.jsonl.gz")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"traces", "anonymise", rec, "-o", anon}, &out, &out); err != nil {
		t.Fatalf("traces anonymise: %v\n%s", err, out.String())
	}
	if a := stats(anon); a != got {
		t.Errorf("stats after anonymise:\n%s\nbefore:\n%s", a, got)
	}

	out.Reset()
	if err := run(context.Background(), []string{"plan", "--json", "--set", "workload.traces=" + rec}, &out, &out); err != nil {
		t.Fatalf("plan with the recording as the workload: %v\n%s", err, out.String())
	}
}

// chatTurn sends one streamed chat request with usage.
func chatTurn(t *testing.T, base, model string, msgs []map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": msgs, "max_tokens": 20, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(b.String(), "[DONE]") {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, b.String())
	}
}

// TestRecordHelp: record and traces anonymise say what they do and show an
// example, as every command does.
func TestRecordHelp(t *testing.T) {
	for _, args := range [][]string{{"record", "--help"}, {"traces", "anonymise", "--help"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "never") {
			t.Errorf("%v:\n%s", args, out.String())
		}
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"record", "-o", filepath.Join(t.TempDir(), "r.jsonl")}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "--upstream") {
		t.Errorf("record without --upstream: %v", err)
	}
}
