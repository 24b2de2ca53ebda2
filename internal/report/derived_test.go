package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// TestDerivedInteractivityIsLabelled: a step whose interactivity was
// derived from per-token latency (SGLang) shows the figure marked derived,
// with a line saying how, on the terminal, in report.md and in report.html;
// a step measured per request carries no mark and no line.
func TestDerivedInteractivityIsLabelled(t *testing.T) {
	step := func(n int, derived string) Step {
		v := stats.Summary{Center: 21.4, Lo: 20.8, Hi: 21.9}
		src := signal.TPOT
		if derived != "" {
			src = verdict.DerivedSource
		}
		return Step{Sessions: n, Verdict: verdict.Fail, InteractivityP90: v, Parts: []verdict.Part{
			{Name: verdict.PartInteractivity, Verdict: verdict.Fail, Value: v, Bar: 60, Source: src, Derived: derived},
		}}
	}
	render := func(s Summary) map[string]string {
		var text bytes.Buffer
		if err := WriteText(&text, s); err != nil {
			t.Fatal(err)
		}
		return map[string]string{"terminal": text.String(), "report.md": string(Markdown(s)), "report.html": string(HTML(Run{Summary: s}))}
	}
	derived := Summary{Version: SummaryVersion, Steps: []Step{step(4, signal.DerivedTPOT)}}
	for name, out := range render(derived) {
		if !strings.Contains(out, "21.4"+derivedMark) && !strings.Contains(out, "21.4 (20.8-21.9)"+derivedMark) {
			t.Errorf("%s: the derived figure is not marked%s", name, derivedMark)
		}
		if !strings.Contains(out, "no per-request time per output token") || !strings.Contains(out, "derived from per-token latency") {
			t.Errorf("%s: no line says how the figure was derived", name)
		}
	}
	measured := Summary{Version: SummaryVersion, Steps: []Step{step(4, "")}}
	for name, out := range render(measured) {
		if strings.Contains(out, derivedMark) || strings.Contains(out, "no per-request time per output token") {
			t.Errorf("%s: a measured figure is marked derived", name)
		}
	}
}
