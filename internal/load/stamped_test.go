package load

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/transport"
)

// On a virtual clock the client stamps each token with the instant the
// server wrote it, though it reads the stream only when the answer ends
// (memnet's stamped body): a whole answer and one cut by its deadline read
// the first and last token's instants as a reader woken at every token did.
func TestVirtualTokensStampedAtTheirWrite(t *testing.T) {
	clock := timescale.NewVirtual()
	net := memnet.New(clock)
	base := net.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for range 3 {
			if err := clock.Sleep(r.Context(), time.Second); err != nil {
				return
			}
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`+"\n\n")
		}
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	c := NewClientConn(base, "m", transport.Conn{RoundTripper: net.Transport()})
	c.UseClock(clock)
	for _, tc := range []struct {
		deadline    time.Duration
		err         string
		chunks      int
		first, last time.Duration
	}{
		{time.Minute, "", 3, time.Second, 3 * time.Second},
		{2500 * time.Millisecond, ErrTimeout, 2, time.Second, 2 * time.Second},
	} {
		var res Result
		var start time.Duration
		clock.Run(func() {
			start = clock.Now()
			res = c.Stream(context.Background(), []byte("a b c"), 3, tc.deadline)
		})
		first, last := clock.At(res.First)-start, clock.At(res.Last)-start
		if res.Error != tc.err || res.Chunks != tc.chunks || first != tc.first || last != tc.last {
			t.Errorf("deadline %v: error %q (%s), %d chunks, first %v, last %v; want %q, %d, %v, %v",
				tc.deadline, res.Error, res.Detail, res.Chunks, first, last, tc.err, tc.chunks, tc.first, tc.last)
		}
	}
}
