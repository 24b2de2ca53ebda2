package fidelity

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const referenceDir = "../../examples/reference"

func loadPublished(t *testing.T) File {
	t.Helper()
	f, err := Load(filepath.Join(referenceDir, "published.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPublishedHasEveryRecipe: the published file loads strictly and holds
// recipes 0-7, each with its run file beside it; the two the report dropped
// (2 and 4) have no results row, the other six have one.
func TestPublishedHasEveryRecipe(t *testing.T) {
	f := loadPublished(t)
	if len(f.Recipes) != 8 {
		t.Errorf("%d recipes, want 8", len(f.Recipes))
	}
	for n := range 8 {
		p, ok := f.Recipe(n)
		if !ok {
			t.Errorf("recipe %d is missing", n)
			continue
		}
		if _, err := os.Stat(filepath.Join(referenceDir, p.RunFile)); err != nil {
			t.Errorf("recipe %d: run file: %v", n, err)
		}
		if want := n == 2 || n == 4; p.Dropped != want {
			t.Errorf("recipe %d: dropped %v, want %v", n, p.Dropped, want)
		}
	}
	if p, _ := f.Recipe(2); p.Limit != LimitErrors {
		t.Errorf("recipe 2 is limited by %q, want errors", p.Limit)
	}
	if p, _ := f.Recipe(4); p.Light == nil || p.Light.Bound != Words || p.Setup.PrefillEngines != 1 || p.Setup.Copies != 2 || p.Setup.GPUs != 32 {
		t.Errorf("recipe 4: light %+v, setup %+v: want one prefill engine and 2 decode copies on 32 GPUs, and the light-only words", p.Light, p.Setup)
	}
	if p, _ := f.Recipe(5); p.KVPeak == nil || p.KVPeak.High != 0.5 || p.KVPeak.Bound != Below {
		t.Errorf("recipe 5's KV peak %+v, want under half", p.KVPeak)
	}
	if p, _ := f.Recipe(0); p.InFlight == nil || !p.InFlight.LightOverHeavy {
		t.Errorf("recipe 0's requests in flight %+v, want light over heavy", p.InFlight)
	}
}

// sessions is the figure a capacity cell stands for: its value, or the
// bound it states.
func sessions(f *Figure) float64 {
	switch {
	case f == nil:
		return 0
	case f.Value > 0:
		return f.Value
	case f.Bound == AtLeast:
		return f.Low
	}
	return f.High
}

// TestPublishedIsConsistent checks the transcription against the report's
// own arithmetic: $ per session-hour is the node price over the sessions
// held (rounded cells, so within 5%), the prices add up, and the
// capacities keep the report's order 7 >= 6 > 3 > 1 >= 5 >= 0.
func TestPublishedIsConsistent(t *testing.T) {
	f := loadPublished(t)
	if got := float64(f.Price.GPUsPerNode) * f.Price.USDPerGPUHour; math.Abs(got-f.Price.USDPerNodeHour) > 1e-9 {
		t.Errorf("8 GPUs x $%g = $%g, the file says $%g a node-hour", f.Price.USDPerGPUHour, got, f.Price.USDPerNodeHour)
	}
	for _, p := range f.Recipes {
		if p.Dropped {
			if p.Capacity != nil || p.USDPerSessionHour != nil || p.Target != TargetUnknown {
				t.Errorf("recipe %d was dropped but has results-table cells", p.Recipe)
			}
			continue
		}
		perHour := float64(p.Setup.Nodes) * f.Price.USDPerNodeHour
		usd := sessions(p.USDPerSessionHour)
		if got := perHour / sessions(p.Capacity); math.Abs(got-usd) > 0.05*usd {
			t.Errorf("recipe %d: $%.2f an hour over %s sessions is $%.2f a session-hour, the table says %s", p.Recipe, perHour, p.Capacity.Text, got, p.USDPerSessionHour.Text)
		}
		if p.USDPerMTok == nil || p.Light == nil || p.Heavy == nil || p.Limit == LimitUnknown {
			t.Errorf("recipe %d has a results row but misses a cell", p.Recipe)
		}
	}
	c := map[int]float64{}
	for _, n := range []int{0, 1, 3, 5, 6, 7} {
		p, _ := f.Recipe(n)
		c[n] = sessions(p.Capacity)
	}
	if !(c[7] >= c[6] && c[6] > c[3] && c[3] > c[1] && c[1] >= c[5] && c[5] >= c[0]) {
		t.Errorf("capacities %v do not keep the order 7 >= 6 > 3 > 1 >= 5 >= 0", c)
	}
}

// TestParseRefuses lists what a published file may not say.
func TestParseRefuses(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(referenceDir, "published.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(b)
	cases := []struct {
		name     string
		from, to string
		want     string
	}{
		// Unknown fields are errors, not ignored.
		{"unknown field", "    dropped: true\n    limit: errors", "    dropped: true\n    limits: errors", "unknown field"},
		// A figure's bound must match its numbers: a range needs both ends.
		{"bad range", `light: {text: "10–11", low: 10, high: 11, bound: range}`, `light: {text: "10–11", low: 10, bound: range}`, "recipes[1].light"},
		{"unknown bound", `heavy: {text: "< 5", high: 5, bound: below}`, `heavy: {text: "< 5", high: 5, bound: under}`, "bound \"under\""},
		// A value outside its own interval.
		{"outside interval", `value: 11, low: 10, high: 12`, `value: 13, low: 10, high: 12`, "outside its interval"},
		// Every figure says where it is read.
		{"no source", `      heavy: "results table, row 3, 'Heavy-only': < 7"` + "\n", "", "recipes[3].from.heavy"},
		// A recipe listed twice.
		{"twice", "  - recipe: 7\n", "  - recipe: 6\n", "listed twice"},
		// A results-table recipe without its verdict.
		{"no target", "    target: held\n    stress: passed\n", "    stress: passed\n", "give its capacity and target verdict"},
		{"unknown limit", "    limit: not_reached\n", "    limit: latency\n", "unknown limit"},
		{"gpus", "      nodes: 4\n      gpus: 32\n      copies: 2\n      prefill_engines: 1\n", "      nodes: 4\n      gpus: 16\n      copies: 2\n      prefill_engines: 1\n", "recipes[4].setup.gpus"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.from) {
				t.Fatalf("test setup: %q not in published.yaml", tc.from)
			}
			_, err := Parse([]byte(strings.Replace(base, tc.from, tc.to, 1)), "p.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "p.yaml") {
				t.Errorf("error %v, want one naming p.yaml and %q", err, tc.want)
			}
		})
	}
}
