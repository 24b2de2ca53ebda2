package report

import (
	"fmt"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// derivedMark follows an interactivity figure the server did not report
// itself: derived per request from per-token latency (SGLang).
const derivedMark = " (derived)"

// interactivityDerived says how the step's interactivity was derived, ""
// when the server reported its per-request time per output token.
func interactivityDerived(st Step) string {
	for _, p := range st.Parts {
		if p.Name == verdict.PartInteractivity {
			return p.Derived
		}
	}
	return ""
}

// interactivityCell is the step table's interactivity figure, marked when
// derived.
func interactivityCell(st Step) string {
	cell := fmtCI(st.InteractivityP90, 1, 1)
	if interactivityDerived(st) != "" {
		cell += derivedMark
	}
	return cell
}

// derivedNote is the line under a step table with a derived interactivity
// figure, saying what was derived and how; "" when none was.
func derivedNote(steps []Step) string {
	for _, st := range steps {
		if how := interactivityDerived(st); how != "" {
			return fmt.Sprintf("tokens/s per user marked%s: the server reports no per-request time per output token, so it is %s.", derivedMark, how)
		}
	}
	return ""
}
