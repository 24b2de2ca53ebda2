package sim

import (
	"testing"

	"github.com/headroom-bench/headroom/internal/signal"
)

// TestFreshGatewayReportsErrorCounters: before any chat request, a
// cluster's /metrics already carries the gateway's request-duration family,
// so a gen_ai mapping reads its error counters (4xx, 5xx, failed) as zero
// rather than missing. Without it pre-flight stopped every recipe judged at
// the gateway (the reference recipes 3, 4, 6 and 7): "the bar needs signals
// the server does not report: requests_aborted or requests_failed,
// http_4xx, http_5xx".
func TestFreshGatewayReportsErrorCounters(t *testing.T) {
	_, url := startCluster(t, 2, RoundRobin, 500)
	s := sample(t, url, signal.GenAI())
	for _, name := range []string{signal.HTTP4xx, signal.HTTP5xx, signal.RequestsFailed, signal.RequestsOK} {
		v, ok := s.Counter[name]
		if !ok || v != 0 {
			t.Errorf("fresh gateway: %s = %g (present %v), want a count of 0", name, v, ok)
		}
	}
}
