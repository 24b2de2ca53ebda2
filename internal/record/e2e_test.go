package record

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/trace"
)

// proxied is a recorder serving on loopback in front of an upstream.
type proxied struct {
	rec  *Recorder
	srv  *http.Server
	url  string
	out  *File
	path string
}

func startRecorder(t testing.TB, upstream string, o Options) *proxied {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxied{path: filepath.Join(t.TempDir(), "rec.jsonl.gz")}
	if o.Out == nil {
		if p.out, err = CreateFile(p.path, false); err != nil {
			t.Fatal(err)
		}
		o.Out, o.Gzip = p.out, true
	}
	o.Upstream = u
	if o.Log == nil {
		o.Log = func(f string, args ...any) { t.Logf(f, args...) }
	}
	if p.rec, err = New(o); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.srv = &http.Server{Handler: p.rec.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	p.url = "http://" + ln.Addr().String()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop shuts the proxy down and writes the recording (again: a no-op).
func (p *proxied) stop(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if p.srv != nil {
		if err := p.srv.Shutdown(ctx); err != nil {
			t.Errorf("proxy shutdown: %v", err)
		}
		p.srv = nil
	}
	if err := p.rec.Close(ctx); err != nil {
		t.Errorf("recorder close: %v", err)
	}
	if p.out != nil {
		if err := p.out.Close(); err != nil {
			t.Errorf("closing the recording: %v", err)
		}
		p.out = nil
	}
}

func startSim(t testing.TB) string {
	t.Helper()
	s, err := sim.New(sim.Options{Profile: sim.DefaultProfile(), Scale: 200, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return base
}

// TestRecordAndReplay drives the proxy with four scripted agents at once
// (growing prompts, tool calls, a subagent forked from the middle of each
// history) against the simulator, then checks that the recording has each
// conversation's turns and subagent as the agents made them, and that
// replaying it (trace.Turns, prompt.Builder, load.Client: what a lane
// sends) gets the simulator's prefix cache to hit as often as the live
// sessions did, within 3 points.
func TestRecordAndReplay(t *testing.T) {
	base := startSim(t)
	p := startRecorder(t, base, Options{})
	const key = "sk-live-qqqsecretkeyzzz"
	vocab := newVocabulary(11)
	agents := make([]*scriptAgent, 4)
	for i := range agents {
		agents[i] = &scriptAgent{
			url: p.url, key: key, model: sim.DefaultProfile().Model,
			rng: rand.New(rand.NewPCG(uint64(i), 2)), vocab: vocab, tools: toolDefs(vocab),
			turns: 6 + i, forkAfter: 2, forkAt: 4, subTurns: 3, think: 5 * time.Millisecond,
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(agents))
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.run(context.Background())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("agent %d: %v", i, err)
		}
	}
	p.stop(t)
	st := p.rec.Stats()
	t.Logf("recorder: %s", st)
	if st.Dropped() > 0 || st.Recorded != st.Chats {
		t.Fatalf("recorded %d of %d chat requests, %d dropped", st.Recorded, st.Chats, st.Dropped())
	}

	traces, err := trace.ReadPath(p.path)
	if err != nil {
		t.Fatalf("reading the recording: %v", err)
	}
	if len(traces) != len(agents) {
		t.Fatalf("%d traces, want one per agent (%d)", len(traces), len(agents))
	}
	// Match traces to agents by their last prompt's length.
	var livePrompt, liveCached float64
	for _, a := range agents {
		tr := traceOf(t, traces, a.truth[len(a.truth)-1].prompt)
		checkStructure(t, tr, a)
		for _, s := range a.truth {
			livePrompt += float64(s.prompt)
			liveCached += float64(s.cached)
		}
	}
	replayPrompt, replayCached := replay(t, base, traces)
	live, rep := liveCached/livePrompt, replayCached/replayPrompt
	t.Logf("prefix-cache hit rate: live %.2f%% of %d prompt tokens, replay %.2f%% of %d", 100*live, int(livePrompt), 100*rep, int(replayPrompt))
	if math.Abs(live-rep) > 0.03 {
		t.Errorf("replay hit rate %.3f, live %.3f: more than 3 points apart", rep, live)
	}
	if math.Abs(replayPrompt-livePrompt) > 0.01*livePrompt {
		t.Errorf("replayed %g prompt tokens, live %g", replayPrompt, livePrompt)
	}

	// Nothing the agents said, nor their key, is in the recording.
	raw := readAll(t, p.path)
	words := vocab.all()
	for _, w := range words {
		if bytes.Contains(raw, []byte(w)) {
			t.Fatalf("the recording holds the prompt word %q", w)
		}
	}
	for _, secret := range []string{key, "qqqsecretkeyzzz", "Bearer"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Fatalf("the recording holds %q", secret)
		}
	}
	t.Logf("%d prompt words, the key and the tool names looked for in %d bytes of recording: none found", len(words), len(raw))
}

// traceOf finds the trace whose last request has the given prompt length.
func traceOf(t *testing.T, traces []trace.Trace, lastIn int) trace.Trace {
	t.Helper()
	for _, tr := range traces {
		if tr.Requests[len(tr.Requests)-1].In == lastIn {
			return tr
		}
	}
	t.Fatalf("no trace ends with a %d-token prompt", lastIn)
	return trace.Trace{}
}

// checkStructure compares a trace with what its agent sent: the parent's
// turns, one subagent with its turns, spawned after the fork turn, and
// every request's lengths and tool calls.
func checkStructure(t *testing.T, tr trace.Trace, a *scriptAgent) {
	t.Helper()
	var parent, sub []sent
	for _, s := range a.truth {
		if s.agent == "" {
			parent = append(parent, s)
		} else {
			sub = append(sub, s)
		}
	}
	var calls, subs []trace.Request
	for _, r := range tr.Requests {
		if r.IsSubagent() {
			subs = append(subs, r)
		} else {
			calls = append(calls, r)
		}
	}
	if len(calls) != len(parent) || len(subs) != 1 {
		t.Fatalf("trace %s: %d calls and %d subagents, the agent made %d calls and 1 subagent", tr.ID, len(calls), len(subs), len(parent))
	}
	if n := len(subs[0].Requests); n != len(sub) {
		t.Fatalf("trace %s: the subagent has %d calls, the agent's had %d", tr.ID, n, len(sub))
	}
	for i, r := range calls {
		if r.In != parent[i].prompt || r.Out != parent[i].out {
			t.Errorf("trace %s: call %d: in/out %d/%d, the agent saw %d/%d", tr.ID, i, r.In, r.Out, parent[i].prompt, parent[i].out)
		}
		if want := parent[i].toolCalls > 0; want != (r.Stop == "tool_use") {
			t.Errorf("trace %s: call %d: stop %q, the answer had %d tool calls", tr.ID, i, r.Stop, parent[i].toolCalls)
		}
	}
	for i, r := range subs[0].Requests {
		if r.In != sub[i].prompt || r.Out != sub[i].out {
			t.Errorf("trace %s: subagent call %d: in/out %d/%d, the agent saw %d/%d", tr.ID, i, r.In, r.Out, sub[i].prompt, sub[i].out)
		}
	}
	// The subagent starts after the fork turn and before the next one, and
	// the replay order (trace.Turns) keeps it there.
	turns := tr.Turns()
	var order []string
	for _, tu := range turns {
		order = append(order, tu.Agent)
	}
	want := make([]string, 0, len(turns))
	for i := range parent {
		want = append(want, "")
		if i == a.forkAfter {
			for range sub {
				want = append(want, subs[0].AgentID)
			}
		}
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("trace %s: replay order %q, the agent's %q", tr.ID, order, want)
	}
	// The subagent's first prompt shares the parent's first blocks (it forked
	// from the parent's history) but not all of the fork turn's.
	first := subs[0].Requests[0].HashIDs
	fork := calls[a.forkAfter].HashIDs
	shared := 0
	for shared < min(len(first), len(fork)) && first[shared] == fork[shared] {
		shared++
	}
	if shared == 0 || shared == len(fork) {
		t.Errorf("trace %s: the subagent's first prompt shares %d of the fork turn's %d blocks: want some, not all", tr.ID, shared, len(fork))
	}
}

// replay sends every trace's turns in the order a lane starts them, with the
// prompts a lane builds, and returns the prompt and cached tokens served.
func replay(t *testing.T, base string, traces []trace.Trace) (promptTokens, cached float64) {
	t.Helper()
	c := load.NewClient(base, sim.DefaultProfile().Model)
	defer c.Close()
	var buf []byte
	for k, tr := range traces {
		b := prompt.Builder{Seed: 99, BlockSize: tr.BlockSize}
		for _, tu := range tr.Turns() {
			buf = b.Append(buf[:0], tr.ID, uint64(k), tu.HashIDs, tu.In)
			res := c.Stream(context.Background(), buf, max(tu.Out, 1), 30*time.Second)
			if res.Error != "" {
				t.Fatalf("replaying %s turn %d: %s: %s", tr.ID, tu.Index, res.Error, res.Detail)
			}
			promptTokens += float64(res.PromptTokens)
			cached += float64(res.Cached)
		}
	}
	return promptTokens, cached
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "{") {
		t.Fatalf("recording starts with %q", b[:min(len(b), 20)])
	}
	return b
}
