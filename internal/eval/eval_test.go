package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// toolCase returns the first built-in tool case asking for the named tool.
func toolCase(t *testing.T, tool string) Case {
	t.Helper()
	for _, c := range (ToolSuite{N: len(toolTasks)}).Cases(1) {
		if strings.HasSuffix(c.ID, "-"+tool) {
			return c
		}
	}
	t.Fatalf("no built-in case for tool %s", tool)
	return Case{}
}

func TestClientAndCheckAgainstServers(t *testing.T) {
	tests := []struct {
		name     string
		fault    fault
		wantPass bool
		class    string
		answered bool
	}{
		{"a schema-valid call to the named tool passes", good, true, "", true},
		{"truncated JSON arguments are a schema mismatch", brokenArgs, false, ClassSchema, true},
		{"arguments missing a required field are a schema mismatch", invalidArgs, false, ClassSchema, true},
		{"arguments sent as an object, not a string, are a schema mismatch", objectArgs, false, ClassSchema, true},
		{"a valid call to another offered tool is the wrong tool", wrongTool, false, ClassWrongTool, true},
		{"a call to a tool never offered is an unknown tool", unknownTool, false, ClassUnknownTool, true},
		{"the call left as plain text is no tool call", noTool, false, ClassNoTool, true},
		{"an answer that never comes is a timeout, and the server sees the client leave", slow, false, ClassTimeout, false},
		{"HTTP 400 is a refusal", refuse, false, ClassRefused, false},
		{"HTTP 500 is a server error", serverErr, false, ClassServer, false},
		{"a 200 that is not a chat completion is a bad response", garbage, false, ClassBadResponse, false},
	}
	for _, stream := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(map[bool]string{false: "plain/", true: "stream/"}[stream]+tt.name, func(t *testing.T) {
				srv := newFakeServer(t, tt.fault)
				srv.stream = true
				cl := NewClient(srv.URL, "m", ClientOptions{Timeout: 200 * time.Millisecond, Stream: stream})
				defer cl.Close()
				c := toolCase(t, "Edit")
				r := RunCase(context.Background(), cl, c)
				if r.Pass != tt.wantPass || r.Class != tt.class || r.Answered != tt.answered {
					t.Fatalf("got pass=%v class=%q answered=%v (%s), want pass=%v class=%q answered=%v", r.Pass, r.Class, r.Answered, r.Reason, tt.wantPass, tt.class, tt.answered)
				}
				if !r.ToolCase {
					t.Errorf("a tool case must be marked as one")
				}
				if tt.fault == slow {
					select {
					case <-srv.left:
					case <-time.After(10 * time.Second):
						t.Fatal("the server never saw the abandoned request cancelled")
					}
				}
			})
		}
	}
}

func TestCallerCancelIsAnAbortAndClosesTheConnection(t *testing.T) {
	// A request the caller abandons (the step ends) is an abort, not a
	// timeout, and the server sees the client leave.
	srv := newFakeServer(t, slow)
	cl := NewClient(srv.URL, "m", ClientOptions{Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan CaseResult)
	go func() { done <- RunCase(ctx, cl, toolCase(t, "Read")) }()
	for srv.requests.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	r := <-done
	if r.Class != ClassAborted {
		t.Fatalf("class %q (%s), want %q", r.Class, r.Reason, ClassAborted)
	}
	select {
	case <-srv.left:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the abandoned request cancelled")
	}
}

func TestEveryRequestCarriesMaxTokens(t *testing.T) {
	srv := newFakeServer(t, good)
	cl := NewClient(srv.URL, "m", ClientOptions{})
	custom, err := LoadCustom("../../examples/evals/custom.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rep := Run(context.Background(), cl, append(BuiltIn(1000), custom), Options{Concurrency: 4})
	n := 0
	srv.maxTokens.Range(func(_, v any) bool {
		n++
		if mt := v.(*int); mt == nil || *mt < 1 {
			t.Errorf("a request went out without a positive max_tokens: %v", mt)
		}
		return true
	})
	if want := int(srv.requests.Load()); n != want || n == 0 {
		t.Fatalf("saw max_tokens on %d of %d requests", n, want)
	}
	if rep.Blocked() {
		t.Fatalf("verdict %s on a correct server", rep.Verdict)
	}

	// A request without a cap is refused here and never sent.
	before := srv.requests.Load()
	_, err = cl.Complete(context.Background(), Request{Messages: []Message{{Role: "user", Content: "hi"}}})
	if re, ok := err.(*RequestError); !ok || re.Class != ClassBadRequest {
		t.Fatalf("err %v, want a bad_request RequestError", err)
	}
	if srv.requests.Load() != before {
		t.Fatal("a request without max_tokens was sent")
	}
}

// bigCustom writes a custom suite of 40 cases, enough for a perfect run to
// pass a 0.9 threshold, and loads it.
func bigCustom(t *testing.T) Suite {
	t.Helper()
	example, err := os.ReadFile("../../examples/evals/custom.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(example), "\n") {
		if strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	var b strings.Builder
	for i := range 40 {
		l := lines[i%len(lines)]
		b.WriteString(strings.Replace(l, `"id": "`, fmt.Sprintf(`"id": "%02d-`, i), 1) + "\n")
	}
	path := filepath.Join(t.TempDir(), "custom.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadCustom(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRunVerdicts(t *testing.T) {
	example, err := LoadCustom("../../examples/evals/custom.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	custom := bigCustom(t)
	type want map[string]Verdict
	tests := []struct {
		name   string
		fault  fault
		stream bool
		suites []Suite
		want   want
		report Verdict
	}{
		{"a correct server passes every suite", good, false,
			append(BuiltIn(2000), custom),
			want{"tool_calling": Pass, "long_context_readback": Pass, "custom": Pass}, Pass},
		{"a correct streaming server passes every suite", good, true,
			append(BuiltIn(2000), custom),
			want{"tool_calling": Pass, "long_context_readback": Pass, "custom": Pass}, Pass},
		{"broken tool arguments fail the tool suite confidently; read-back still passes", brokenArgs, false,
			BuiltIn(2000),
			want{"tool_calling": Fail, "long_context_readback": Pass}, Fail},
		{"half the calls broken over 42 cases is a confident fail", everyOther, false,
			[]Suite{ToolSuite{}},
			want{"tool_calling": Fail}, Fail},
		{"the same half broken over 4 cases is inconclusive, not a fail", everyOther, false,
			[]Suite{ToolSuite{N: 4}},
			want{"tool_calling": Inconclusive}, Inconclusive},
		{"five perfect answers are inconclusive at 0.9: too few to say", good, false,
			[]Suite{example},
			want{"custom": Inconclusive}, Inconclusive},
		{"a refusing server fails: unanswered cases count as failures", refuse, false,
			[]Suite{ToolSuite{N: 10}},
			want{"tool_calling": Fail}, Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, tt.fault)
			srv.stream = true
			cl := NewClient(srv.URL, "m", ClientOptions{Stream: tt.stream})
			rep := Run(context.Background(), cl, tt.suites, Options{Concurrency: 1, Seed: 7})
			if rep.Verdict != tt.report || rep.Blocked() != (tt.report == Fail) {
				t.Errorf("report verdict %s blocked=%v, want %s", rep.Verdict, rep.Blocked(), tt.report)
			}
			for _, s := range rep.Suites {
				if s.Verdict != tt.want[s.Suite] {
					t.Errorf("%s: %s (%d/%d, [%.3f, %.3f]), want %s; failures %+v", s.Suite, s.Verdict, s.Passed, s.Cases, s.Rate.Lo, s.Rate.Hi, tt.want[s.Suite], s.Failures)
				}
				if s.Passed < s.Cases && len(s.Failures) == 0 {
					t.Errorf("%s: %d failures but none listed", s.Suite, s.Cases-s.Passed)
				}
			}
			var b strings.Builder
			if err := rep.WriteText(&b); err != nil || !strings.Contains(b.String(), "evals: "+string(tt.report)) {
				t.Errorf("text report: %v\n%s", err, b.String())
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Errorf("report does not marshal: %v", err)
			}
		})
	}
}

func TestRunCancelledCountsUnsentNotFailed(t *testing.T) {
	// Cancelling the run mid-way leaves the rest unsent; unsent cases are not
	// failures and the report says how many there were.
	srv := newFakeServer(t, slow)
	cl := NewClient(srv.URL, "m", ClientOptions{Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-srv.left // never fires before cancel; just drain
	}()
	go func() {
		for srv.requests.Load() < 2 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	rep := Run(ctx, cl, []Suite{ToolSuite{N: 10}}, Options{Concurrency: 2})
	s := rep.Suites[0]
	if s.Cases != 0 || s.Unsent != 10 || len(rep.Warnings) == 0 || s.Verdict != Inconclusive {
		t.Fatalf("got cases=%d unsent=%d verdict=%s warnings=%v; want 0 judged, 10 unsent, inconclusive", s.Cases, s.Unsent, s.Verdict, rep.Warnings)
	}
}

func TestIntervalAndDecide(t *testing.T) {
	tests := []struct {
		name      string
		k, n      int
		method    string
		lo, hi    float64
		threshold float64
		verdict   Verdict
	}{
		// Clopper-Pearson with k = 0: hi = 1 - (alpha/2)^(1/n).
		{"0 of 10 exact bound", 0, 10, "", 0, 1 - math.Pow(0.025, 0.1), 0.9, Fail},
		// k = n mirrors it: lo = (alpha/2)^(1/n).
		{"10 of 10 exact bound", 10, 10, "", math.Pow(0.025, 0.1), 1, 0.9, Inconclusive},
		{"42 of 42 clears 0.9", 42, 42, "", math.Pow(0.025, 1.0/42), 1, 0.9, Pass},
		// Published value for 5 of 10: [0.1871, 0.8129].
		{"5 of 10", 5, 10, ClopperPearson, 0.18709, 0.81291, 0.9, Fail},
		{"2 of 4 holds 0.9", 2, 4, "", 0.06759, 0.93241, 0.9, Inconclusive},
		{"nothing judged is [0, 1]", 0, 0, "", 0, 1, 0.9, Inconclusive},
		// Wilson 5 of 10 at 95%: [0.2366, 0.7634].
		{"Wilson 5 of 10", 5, 10, Wilson, 0.23659, 0.76341, 0.9, Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := Interval(tt.k, tt.n, 0.95, tt.method)
			if math.Abs(lo-tt.lo) > 1e-4 || math.Abs(hi-tt.hi) > 1e-4 {
				t.Fatalf("interval [%.5f, %.5f], want [%.5f, %.5f]", lo, hi, tt.lo, tt.hi)
			}
			if v := Decide(lo, hi, tt.threshold); v != tt.verdict {
				t.Fatalf("verdict %s, want %s", v, tt.verdict)
			}
		})
	}
}

func TestReadBackPrompt(t *testing.T) {
	s := ReadBackSuite{ContextLen: 4000, Repeats: 1}
	cases := s.Cases(3)
	if got, want := len(cases), 3*3; got != want {
		t.Fatalf("%d cases, want %d (3 lengths x 3 depths)", got, want)
	}
	if got := len((ReadBackSuite{ContextLen: 4000}).Cases(3)); got != 36 {
		t.Errorf("default suite has %d cases, want 36 (4 repeats)", got)
	}
	lengths := s.Lengths()
	for i, c := range cases {
		prompt := c.Request.Messages[0].Content
		words := strings.Fields(prompt)
		code := c.Check.(ContainsCheck).Want
		// The prompt is exactly its length in words, ...
		if want := lengths[i/3]; len(words) != want {
			t.Errorf("%s: %d words, want %d", c.ID, len(words), want)
		}
		// ... fits the context with the answer's cap and the margin, ...
		if len(words)+c.Request.MaxTokens > s.ContextLen {
			t.Errorf("%s: %d words + %d max_tokens exceed the context of %d", c.ID, len(words), c.Request.MaxTokens, s.ContextLen)
		}
		// ... holds the code word once, at the asked depth, ...
		if strings.Count(prompt, code) != 1 {
			t.Errorf("%s: code word %q appears %d times", c.ID, code, strings.Count(prompt, code))
		}
		at := float64(len(strings.Fields(prompt[:strings.Index(prompt, code)]))) / float64(len(words))
		if depth := []float64{0.1, 0.5, 0.9}[i%3]; math.Abs(at-depth) > 0.05 {
			t.Errorf("%s: fact at %.2f of the prompt, want about %.2f", c.ID, at, depth)
		}
		// ... and ends with the question.
		if !strings.Contains(prompt[len(prompt)-120:], QuestionLead) {
			t.Errorf("%s: the prompt does not end with the question", c.ID)
		}
	}
	// Too small a context gives no read-back suite.
	if got := BuiltIn(50); len(got) != 1 {
		t.Errorf("BuiltIn(50) gave %d suites, want tool calling only", len(got))
	}
}

func TestBuiltInToolSchemasCompileAndAcceptValidArgs(t *testing.T) {
	ts := builtInToolSet()
	for _, tool := range ts.Tools {
		c, err := ts.Expect(tool.Function.Name)
		if err != nil {
			t.Fatal(err)
		}
		a := Answer{ToolCalls: []ToolCall{{Function: FunctionCall{Name: tool.Function.Name, Arguments: validArgs[tool.Function.Name]}}}}
		if m := c.Check(a); m != nil {
			t.Errorf("%s: valid arguments rejected: %v", tool.Function.Name, m)
		}
	}
	// A relative path breaks Read's pattern; an extra property breaks every
	// schema; a wrong type breaks Bash's timeout.
	bad := map[string]string{
		"Read": `{"file_path":"repo/a.go"}`,
		"Glob": `{"pattern":"*.go","recursive":true}`,
		"Bash": `{"command":"ls","timeout":"soon"}`,
	}
	for name, args := range bad {
		c, _ := ts.Expect(name)
		if m := c.Check(Answer{ToolCalls: []ToolCall{{Function: FunctionCall{Name: name, Arguments: args}}}}); m == nil || m.Class != ClassSchema {
			t.Errorf("%s %s: got %v, want a schema mismatch", name, args, m)
		}
	}
}

func TestMixerShareAndCycle(t *testing.T) {
	tests := []struct {
		name  string
		share float64
		calls int
		want  int
	}{
		{"5% of 1000 requests", 0.05, 1000, 50},
		{"a third of 300", 1.0 / 3, 300, 100},
		{"every request", 1, 40, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMixer(tt.share, 1, ToolSuite{N: 7})
			if err != nil {
				t.Fatal(err)
			}
			var took sync.WaitGroup
			var mu sync.Mutex
			got := 0
			for range 8 {
				took.Go(func() {
					for range tt.calls / 8 {
						if m.Take() {
							mu.Lock()
							got++
							mu.Unlock()
						}
					}
				})
			}
			took.Wait()
			if rest := tt.calls % 8; rest > 0 {
				for range rest {
					if m.Take() {
						got++
					}
				}
			}
			if got != tt.want {
				t.Fatalf("%d eval requests of %d, want %d", got, tt.calls, tt.want)
			}
		})
	}
	m, _ := NewMixer(0.1, 1, ToolSuite{N: 3})
	ids := []string{m.Next().ID, m.Next().ID, m.Next().ID, m.Next().ID}
	if ids[0] != ids[3] || ids[0] == ids[1] || m.Next().Suite != "tool_calling" {
		t.Errorf("Next does not cycle through the cases: %v", ids)
	}
	if _, err := NewMixer(0, 1, ToolSuite{}); err == nil {
		t.Error("a zero share was accepted")
	}
}

func TestStepTallyPart(t *testing.T) {
	tests := []struct {
		name       string
		ok, broken int
		maxShare   float64
		want       verdict.Verdict
		warned     bool
	}{
		{"no tool-call eval answered is no data", 0, 0, 0.02, verdict.NoData, false},
		{"all 40 well formed passes, warned: 40 samples cannot show a share under 2%", 40, 0, 0.02, verdict.Pass, true},
		{"all 200 well formed passes cleanly", 200, 0, 0.02, verdict.Pass, false},
		{"1 of 40 mismatched is not a confident fail at 2%: pass with a warning", 39, 1, 0.02, verdict.Pass, true},
		{"12 of 40 mismatched is a confident fail", 28, 12, 0.02, verdict.Fail, false},
		{"1 of 3 mismatched at a 0 bar is a confident fail", 2, 1, 0, verdict.Fail, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := NewTally()
			var wg sync.WaitGroup
			for i := range tt.ok + tt.broken {
				wg.Go(func() {
					r := CaseResult{Case: "c", Answered: true, ToolCase: true, Pass: i >= tt.broken}
					if !r.Pass {
						r.Class = ClassSchema
					}
					tl.Add(3, r)
				})
			}
			wg.Wait()
			tl.Add(3, CaseResult{Class: ClassTimeout}) // unanswered: not a tool-call sample
			st := tl.Step(3)
			if st.ToolAnswered != tt.ok+tt.broken || st.Mismatched != tt.broken || st.Sent != tt.ok+tt.broken+1 {
				t.Fatalf("tally %+v", st)
			}
			p := st.Part(tt.maxShare, 0.95)
			if p.Verdict != tt.want || (len(p.Value.Warnings) > 0 && tt.want != verdict.NoData) != tt.warned {
				t.Fatalf("part %+v, want %s warned=%v", p, tt.want, tt.warned)
			}
			if _, err := json.Marshal(p); err != nil {
				t.Errorf("part does not marshal: %v", err)
			}
		})
	}
}

func TestToolCallsBreakOnlyUnderLoad(t *testing.T) {
	// A server that breaks tool arguments only when more than one request is
	// in flight: the one-at-a-time evals pass, while the same cases sent by
	// eight concurrent lanes during a step fail the tool_calls bar part.
	srv := newFakeServer(t, underLoad)
	cl := NewClient(srv.URL, "m", ClientOptions{})
	rep := Run(context.Background(), cl, []Suite{ToolSuite{}}, Options{Concurrency: 1})
	if rep.Verdict != Pass {
		t.Fatalf("pre-sweep evals: %s, want pass", rep.Verdict)
	}

	srv.barrier = 8 // hold requests until all eight lanes have one in flight
	mixer, err := NewMixer(0.25, 1, ToolSuite{})
	if err != nil {
		t.Fatal(err)
	}
	tally := NewTally()
	var lanes sync.WaitGroup
	for range 8 {
		lanes.Go(func() {
			for sent := 0; sent < 5; {
				if !mixer.Take() {
					continue // a trace turn would go here
				}
				tally.Add(1, RunCase(context.Background(), cl, mixer.Next()))
				sent++
			}
		})
	}
	lanes.Wait()
	p := tally.Step(1).Part(0.02, 0.95)
	if p.Verdict != verdict.Fail || tally.Step(1).Mismatched != 40 {
		t.Fatalf("under load: %+v (tally %+v), want a fail with 40 mismatches", p, tally.Step(1))
	}
}
