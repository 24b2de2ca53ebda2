package sim

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPreparedReadingMatchesHandlerReading: on an in-memory network a chat
// body is read and scanned off the clock before its handler's turn
// (preparing, memnet.Preparer); every client read, modelled instant and
// the /metrics page are the same as when the handler reads and scans the
// body itself.
func TestPreparedReadingMatchesHandlerReading(t *testing.T) {
	cases := append(streamCases(),
		streamCase{body: string(chatJSON("tiny-model", words("conv", 0, 900), 10, true)), start: 50 * time.Millisecond},
		streamCase{body: string(chatJSON("tiny-model", words("conv", 0, 1300), 10, true)), start: 900 * time.Millisecond},
	)
	var calls atomic.Int64
	build := func(prepare bool) func(Options) (server, error) {
		return func(o Options) (server, error) {
			s, err := New(o)
			if err != nil {
				return nil, err
			}
			p, ok := s.handler.(preparing)
			if !ok {
				t.Fatalf("a simulator on an in-memory network serves %T, want preparing", s.handler)
			}
			if prepare {
				s.handler = countingPreparer{p, &calls}
			} else {
				s.handler = p.Handler
			}
			return s, nil
		}
	}
	prepared := transcript(t, cases, build(true))
	read := transcript(t, cases, build(false))
	compareTranscripts(t, "prepared readings", "the handler's own", prepared, read)
	if !strings.Contains(prepared, "data: [DONE]") {
		t.Error("the transcript holds no finished stream")
	}
	if calls.Load() == 0 {
		t.Error("Prepare never ran: the comparison did not exercise it")
	}
}

// countingPreparer counts the chat bodies preparing read ahead.
type countingPreparer struct {
	preparing
	calls *atomic.Int64
}

func (c countingPreparer) Prepare(req *http.Request, body []byte) any {
	v := c.preparing.Prepare(req, body)
	if v != nil {
		c.calls.Add(1)
	}
	return v
}

// TestPreparedRoutingMatchesGatewayReading: a prefix-affinity gateway on an
// in-memory network scans chat bodies off the clock (clusterPreparing);
// every client read, instant and the /metrics page are the same as when
// its handler reads and scans them.
func TestPreparedRoutingMatchesGatewayReading(t *testing.T) {
	cases := append(streamCases(),
		streamCase{body: string(chatJSON("tiny-model", words("conv", 0, 900), 10, true)), start: 50 * time.Millisecond},
		streamCase{body: string(chatJSON("tiny-model", words("conv", 0, 1300), 10, true)), start: 900 * time.Millisecond},
	)
	var calls atomic.Int64
	build := func(prepare bool) func(Options) (server, error) {
		return func(o Options) (server, error) {
			c, err := NewCluster(ClusterOptions{Options: o, Copies: 2, Router: PrefixAffinity})
			if err != nil {
				return nil, err
			}
			p, ok := c.handler.(clusterPreparing)
			if !ok {
				t.Fatalf("a prefix-affinity gateway on an in-memory network serves %T, want clusterPreparing", c.handler)
			}
			if prepare {
				c.handler = countingClusterPreparer{p, &calls}
			} else {
				c.handler = p.Handler
			}
			return c, nil
		}
	}
	prepared := transcript(t, cases, build(true))
	read := transcript(t, cases, build(false))
	compareTranscripts(t, "prepared routing", "the gateway's own reading", prepared, read)
	if calls.Load() == 0 {
		t.Error("Prepare never ran: the comparison did not exercise it")
	}
}

type countingClusterPreparer struct {
	clusterPreparing
	calls *atomic.Int64
}

func (c countingClusterPreparer) Prepare(req *http.Request, body []byte) any {
	c.calls.Add(1)
	return c.clusterPreparing.Prepare(req, body)
}
