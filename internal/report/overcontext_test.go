package report

import (
	"strings"
	"testing"
)

// TestOverContextRendering: the counts of turns over the served context show
// in the text summary and report.md, and nothing shows when they are absent.
func TestOverContextRendering(t *testing.T) {
	s := Summary{OverContext: &OverContext{ContextTokens: 131072, Source: "/v1/models max_model_len", Skipped: true, Tiers: []OverContextTier{
		{Tier: "heavy", Turns: 400, Over: 264, SubagentTurns: 26, SubagentOver: 14, Dropped: 271, SubagentDropped: 21},
		{Tier: "light", Turns: 408, Over: 0, SubagentTurns: 128},
	}}}
	var b strings.Builder
	if err := WriteText(&b, s); err != nil {
		t.Fatal(err)
	}
	md := string(Markdown(s))
	for _, want := range []string{
		"heavy: 264 of 400 turns (66.0%) need more than the 131072-token context (/v1/models max_model_len), 14 of them subagent turns; 271 turns were dropped and never sent (21 subagent)",
		"light: 0 of 408 turns (0.0%)",
	} {
		if !strings.Contains(b.String(), "over context: "+want) {
			t.Errorf("text summary lacks %q:\n%s", want, b.String())
		}
		if !strings.Contains(md, "- "+want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if !strings.Contains(md, "## Turns over the served context") {
		t.Error("report.md has no section for the turns over the context")
	}
	// Without skipping nothing was dropped, and the line does not say so.
	s.OverContext.Skipped = false
	if l := s.OverContext.Lines()[0]; strings.Contains(l, "dropped") {
		t.Errorf("a run that did not skip says turns were dropped: %q", l)
	}
	s.OverContext = nil
	b.Reset()
	WriteText(&b, s)
	if strings.Contains(b.String(), "over context") || strings.Contains(string(Markdown(s)), "served context") {
		t.Error("a summary without counts renders them")
	}
}
