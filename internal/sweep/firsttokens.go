package sweep

import (
	"fmt"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/signal"
)

// minFirstTokens is the fewest first tokens the client must have seen in a
// window for its count to check the server's.
const minFirstTokens = 4

// checkFirstTokens cross-checks, window by window, the server's count of
// TTFT observations against the first tokens the client saw: a server that
// counts more observations than there were requests that could have had
// their first token in the window (those the client saw, those still in
// flight, and, for the requests of before the window that the records do
// not hold, twice the mean in flight), or fewer than half of those the
// client saw, is not measuring these requests: its TTFT is left out of
// that window, which then has no data for it, with a warning.
func checkFirstTokens(windows []signal.Window, records []load.Record, inFlight float64) {
	for i := range windows {
		w := &windows[i]
		h, ok := w.Hist[signal.TTFT]
		if !ok {
			continue
		}
		from, to := w.Start.Seconds(), w.End.Seconds()
		seen, open := 0, 0
		for _, rec := range records {
			switch {
			case rec.FirstToken > 0:
				if rec.FirstToken >= from && rec.FirstToken < to {
					seen++
				}
			case rec.Pending && rec.Send < to:
				open++
			}
		}
		most := 2 * (float64(seen+open) + 2*inFlight + 2)
		switch {
		case h.Count > most:
			w.Warnings = append(w.Warnings, fmt.Sprintf("cross-check: %s counted %g observations, more than twice the %d requests that could have had a first token in the window (%d first tokens seen, %d in flight, and about %.0f from before it): its TTFT is no data here",
				signal.TTFT, h.Count, seen+open, seen, open, 2*inFlight+2))
		case seen >= minFirstTokens && h.Count < float64(seen)/2:
			w.Warnings = append(w.Warnings, fmt.Sprintf("cross-check: %s counted %g observations, fewer than half the %d first tokens the client saw in the window: its TTFT is no data here",
				signal.TTFT, h.Count, seen))
		default:
			continue
		}
		delete(w.Hist, signal.TTFT)
	}
}
