package sim

import (
	"strings"
	"testing"
	"time"
)

// TestRoutedReadingMatchesCopyReading checks a prefix-affinity cluster that
// hands the router's reading of a body (routedChat) to the copy it picked
// against one whose copies read and scan every body again: the same reads
// at the same modelled instants for every client, and the same /metrics
// page; the copies of the first never scanned a body.
func TestRoutedReadingMatchesCopyReading(t *testing.T) {
	cases := append(streamCases(),
		// One conversation's turns, long enough for the scan caches.
		streamCase{body: string(chatJSON("tiny-model", words("conv", 0, 900), 10, true)), start: 50 * time.Millisecond},
		streamCase{body: string(chatJSON("tiny-model", words("conv", 0, 1300), 10, true)), start: 900 * time.Millisecond},
	)
	var clusters []*Cluster
	build := func(rereads bool) func(Options) (server, error) {
		return func(o Options) (server, error) {
			c, err := NewCluster(ClusterOptions{Options: o, Copies: 2, Router: PrefixAffinity})
			if err == nil {
				c.rereads = rereads
				clusters = append(clusters, c)
			}
			return c, err
		}
	}
	routed := transcript(t, cases, build(false))
	reread := transcript(t, cases, build(true))
	compareTranscripts(t, "routed readings", "the copies' own", routed, reread)
	for _, want := range []string{"data: [DONE]", `vllm:generation_tokens_total{copy="0"`, `vllm:generation_tokens_total{copy="1"`} {
		if !strings.Contains(routed, want) {
			t.Errorf("the transcript lacks %s", want)
		}
	}
	scanned := func(c *Cluster) (n int) {
		for _, s := range c.copies {
			n += s.scans.held
		}
		return n
	}
	if n := scanned(clusters[0]); n != 0 {
		t.Errorf("the copies behind the router cached %d bytes of scans: they read the bodies again", n)
	}
	if scanned(clusters[1]) == 0 {
		t.Error("the copies that read every body cached no scan: the comparison did not exercise the scan cache")
	}
}
