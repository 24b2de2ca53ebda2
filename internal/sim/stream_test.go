package sim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// streamCase is one client of the direct-stream comparison.
type streamCase struct {
	body  string
	start time.Duration // modelled time the client sends
	// leaveAfter closes the body after this many reads (0: read to the end);
	// deadline cancels the request this long after it was sent (0: none).
	leaveAfter int
	deadline   time.Duration
}

// transcript is what the clients saw and what the engine counted: every
// read with its modelled time, then the /metrics page.
func directTranscript(t *testing.T, handlerWrites bool, cases []streamCase) string {
	t.Helper()
	return transcript(t, cases, func(o Options) (server, error) {
		s, err := New(o)
		if err == nil {
			s.handlerWrites = handlerWrites
		}
		return s, err
	})
}

// server is a Sim or a Cluster.
type server interface {
	Start(addr string) (string, error)
	Close() error
}

// transcript serves what build makes on a virtual clock and sends it cases.
func transcript(t *testing.T, cases []streamCase, build func(Options) (server, error)) string {
	t.Helper()
	clock := timescale.NewVirtual()
	net := memnet.New(clock)
	p := tinyProfile()
	p.MaxNumSeqs = 4 // some requests queue
	s, err := build(Options{Profile: p, Clock: clock, Net: net, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]strings.Builder, len(cases))
	var page []byte
	clock.Run(func() {
		url, err := s.Start("")
		if err != nil {
			t.Error(err)
			return
		}
		client := net.Client()
		g := clock.NewGroup()
		for i, tc := range cases {
			g.Go(func() {
				b := &out[i]
				ctx := context.Background()
				if err := clock.SleepUntil(ctx, tc.start); err != nil {
					t.Error(err)
					return
				}
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = clock.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(tc.body))
				resp, err := client.Do(req)
				if err != nil {
					fmt.Fprintf(b, "%v error %v\n", clock.Now(), err)
					return
				}
				defer resp.Body.Close()
				fmt.Fprintf(b, "%v status %d\n", clock.Now(), resp.StatusCode)
				buf := make([]byte, 1<<16)
				for reads := 1; ; reads++ {
					n, err := resp.Body.Read(buf)
					fmt.Fprintf(b, "%v read %q %v\n", clock.Now(), buf[:n], err)
					if err != nil || reads == tc.leaveAfter {
						return
					}
				}
			})
		}
		_ = g.Wait(context.Background())
		resp, err := client.Get(url + "/metrics")
		if err != nil {
			t.Error(err)
			return
		}
		page, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	var all strings.Builder
	for i := range out {
		fmt.Fprintf(&all, "client %d\n%s", i, out[i].String())
	}
	all.Write(page)
	return all.String()
}

// TestDirectStreamMatchesHandlerWrites checks the engine's own writes of a
// stream on a virtual clock (engine.hand) against the handler writing every
// token, as it does on a wall clock: the same bytes in the same reads at the
// same modelled instants for every client (text, tool calls, answers of one
// token, plain answers, clients that leave mid-answer or run out of time),
// and the same /metrics page after.
func TestDirectStreamMatchesHandlerWrites(t *testing.T) {
	cases := streamCases()
	handler := directTranscript(t, true, cases)
	direct := directTranscript(t, false, cases)
	compareTranscripts(t, "the engine's writes", "the handler's", direct, handler)
	// The comparison must have seen what it claims to (reads are quoted).
	for _, want := range []string{
		`tool_calls\"`, `finish_reason\":\"length`, `finish_reason\":\"tool_calls`, `data: [DONE]`, `\"object\":\"chat.completion\"`,
		"context deadline exceeded", "status 404",
		`vllm:request_success_total{engine="0",finished_reason="abort",model_name="tiny-model"} 2`,
	} {
		if !strings.Contains(direct, want) {
			t.Errorf("the transcript lacks %s", want)
		}
	}
}

// compareTranscripts fails at the first line where got differs from want.
func compareTranscripts(t *testing.T, gotName, wantName, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(gl) && i < len(wl); i++ {
		if gl[i] != wl[i] {
			t.Fatalf("%s differ from %s at line %d:\n%s: %s\n%s: %s", gotName, wantName, i+1, gotName, gl[i], wantName, wl[i])
		}
	}
	t.Fatalf("%s differ from %s: %d lines against %d", gotName, wantName, len(gl), len(wl))
}

// streamCases are clients of every kind: streamed text of several lengths
// (some sharing a prefix), a tool call, a one-token answer, a plain answer,
// one that leaves, one that runs out of time, one for another model.
func streamCases() []streamCase {
	chat := func(prompt string, maxTokens int, stream bool) string {
		return string(chatJSON("tiny-model", prompt, maxTokens, stream))
	}
	tools := `[{"type":"function","function":{"name":"Read","parameters":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}}]`
	tool := fmt.Sprintf(`{"model":"tiny-model","max_tokens":200,"stream":true,"stream_options":{"include_usage":true},"tools":%s,"messages":[{"role":"user","content":"Use the Read tool on /repo/internal/sim/engine.go please"}]}`, tools)
	var cases []streamCase
	for i := range 8 {
		cases = append(cases, streamCase{body: chat(words(fmt.Sprintf("c%d", i%3), 0, 300+40*i), 5+7*i, true), start: time.Duration(i) * 30 * time.Millisecond})
	}
	cases = append(cases,
		streamCase{body: tool, start: 10 * time.Millisecond},
		streamCase{body: chat(words("one", 0, 50), 1, true), start: 20 * time.Millisecond},
		streamCase{body: chat(words("plain", 0, 80), 12, false), start: 25 * time.Millisecond},
		streamCase{body: chat(words("leave", 0, 120), 40, true), start: 5 * time.Millisecond, leaveAfter: 6},
		streamCase{body: chat(words("late", 0, 200), 60, true), start: 15 * time.Millisecond, deadline: 400 * time.Millisecond},
		streamCase{body: `{"model":"other","messages":[{"role":"user","content":"hi"}],"stream":true}`, start: 40 * time.Millisecond},
	)
	return cases
}
