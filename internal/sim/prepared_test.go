package sim

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// preparedCases are the stream cases and one conversation's turns, long
// enough for the scan caches.
func preparedCases() []streamCase {
	return append(streamCases(),
		streamCase{body: string(chatJSON("tiny-model", words("conv", 0, 900), 10, true)), start: 50 * time.Millisecond},
		streamCase{body: string(chatJSON("tiny-model", words("conv", 0, 1300), 10, true)), start: 900 * time.Millisecond},
		// a reply planned in Prepare: the code word read back, and a
		// tool_choice the plan refuses
		streamCase{body: string(chatJSON("tiny-model", words("rb", 0, 200)+" "+factLead+"teal-comet-0042. Remember it. "+words("rb", 200, 100)+"\n\n"+questionLead+" stated in the text above?", 8, true)), start: 60 * time.Millisecond},
		streamCase{body: `{"model":"tiny-model","max_tokens":20,"stream":true,"tool_choice":"sometimes","tools":[{"type":"function","function":{"name":"Read","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"read it"}]}`, start: 70 * time.Millisecond},
	)
}

// comparePrepared runs the cases against a server whose in-memory host
// prepares chat bodies off the clock (handler: counting its Prepare calls)
// and against the same server with the plain handler, and compares every
// client read, instant and /metrics page.
func comparePrepared(t *testing.T, what string, build func(o Options, prepare bool, calls *atomic.Int64) (server, error)) {
	t.Helper()
	var calls atomic.Int64
	with := func(prepare bool) func(Options) (server, error) {
		return func(o Options) (server, error) { return build(o, prepare, &calls) }
	}
	cases := preparedCases()
	prepared := transcript(t, cases, with(true))
	read := transcript(t, cases, with(false))
	compareTranscripts(t, "prepared "+what, "the handler's own reading", prepared, read)
	if !strings.Contains(prepared, "data: [DONE]") {
		t.Error("the transcript holds no finished stream")
	}
	if calls.Load() == 0 {
		t.Error("Prepare never ran: the comparison did not exercise it")
	}
}

// TestPreparedReadingMatchesHandlerReading: on an in-memory network a chat
// body is read and scanned off the clock before its handler's turn
// (preparing, memnet.Preparer), with the same result as when the handler
// reads and scans it itself.
func TestPreparedReadingMatchesHandlerReading(t *testing.T) {
	comparePrepared(t, "readings", func(o Options, prepare bool, calls *atomic.Int64) (server, error) {
		s, err := New(o)
		if err != nil {
			return nil, err
		}
		p, ok := s.handler.(preparing)
		if !ok {
			t.Fatalf("a simulator on an in-memory network serves %T, want preparing", s.handler)
		}
		s.handler = p.Handler
		if prepare {
			s.handler = countingPreparer{p, calls}
		}
		return s, nil
	})
}

// TestPreparedRoutingMatchesGatewayReading: a prefix-affinity gateway on an
// in-memory network scans chat bodies off the clock (clusterPreparing),
// with the same result as when its handler reads and scans them.
func TestPreparedRoutingMatchesGatewayReading(t *testing.T) {
	comparePrepared(t, "routing", func(o Options, prepare bool, calls *atomic.Int64) (server, error) {
		c, err := NewCluster(ClusterOptions{Options: o, Copies: 2, Router: PrefixAffinity})
		if err != nil {
			return nil, err
		}
		p, ok := c.handler.(clusterPreparing)
		if !ok {
			t.Fatalf("a prefix-affinity gateway on an in-memory network serves %T, want clusterPreparing", c.handler)
		}
		c.handler = p.Handler
		if prepare {
			c.handler = countingPreparer{p, calls}
		}
		return c, nil
	})
}

// countingPreparer counts the bodies a host's Prepare read.
type countingPreparer struct {
	p interface {
		http.Handler
		Prepare(*http.Request, []byte) any
	}
	calls *atomic.Int64
}

func (c countingPreparer) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.p.ServeHTTP(w, r) }

func (c countingPreparer) Prepare(req *http.Request, body []byte) any {
	c.calls.Add(1)
	return c.p.Prepare(req, body)
}
