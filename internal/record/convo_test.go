package record

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/trace"
)

// shaper turns chat requests into shapes as the recorder does, text blocks.
type shaper struct {
	r   *Recorder
	now time.Time
}

func newShaper() *shaper {
	r := &Recorder{seed: maphash.MakeSeed(), tok: newTokenizer(mustURL("http://127.0.0.1:1"), nil, TokenizeOff)}
	return &shaper{r: r, now: time.Unix(1_700_000_000, 0)}
}

// msgs is a conversation written as "role:text" strings.
func msgs(parts ...string) []map[string]any {
	var out []map[string]any
	for _, p := range parts {
		role, text, _ := strings.Cut(p, ":")
		out = append(out, map[string]any{"role": role, "content": text})
	}
	return out
}

// shape makes the shape of one request sent at the shaper's clock, taking
// one second, its answer's usage giving words as prompt tokens.
func (sh *shaper) shape(t *testing.T, ms []map[string]any) *shape {
	t.Helper()
	return sh.shapeBody(t, ms, map[string]any{"model": "m", "messages": ms, "stream": true})
}

// shapeBody is shape for a request body of its own (another model, tools).
func (sh *shaper) shapeBody(t *testing.T, ms []map[string]any, req map[string]any) *shape {
	t.Helper()
	body, _ := json.Marshal(req)
	words := 0
	for _, m := range ms {
		words += len(strings.Fields(m["content"].(string)))
	}
	resp := fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n", words)
	x := &exchange{arrival: sh.now, first: sh.now.Add(100 * time.Millisecond), end: sh.now.Add(time.Second), req: body, resp: []byte(resp), reqDone: make(chan struct{}), contentType: "text/event-stream", status: 200}
	close(x.reqDone)
	sh.now = sh.now.Add(2 * time.Second)
	s, err := sh.r.shapeOf(x)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// layout describes a trace: each model call as "." and each subagent as
// "[...]" with its own calls, in order.
func layout(reqs []trace.Request) string {
	var b strings.Builder
	for _, r := range reqs {
		if r.IsSubagent() {
			b.WriteString("[" + layout(r.Requests) + "]")
		} else {
			b.WriteByte('.')
		}
	}
	return b.String()
}

// TestConversationRules: each case is a sequence of prompts (in the order
// their answers end) and the conversations they must make.
func TestConversationRules(t *testing.T) {
	sys := "system:you are a careful agent"
	cases := []struct {
		name    string
		prompts [][]string
		want    []string // each conversation's layout, in the order they began
	}{
		// Each prompt extends the one before: one conversation of three turns.
		{"growing prompts", [][]string{
			{sys, "user:fix the bug"},
			{sys, "user:fix the bug", "assistant:reading", "user:here is the file"},
			{sys, "user:fix the bug", "assistant:reading", "user:here is the file", "assistant:done", "user:thanks"},
		}, []string{"..."}},
		// The same prompt again (a retry) is a turn of its own in the same conversation.
		{"retry", [][]string{
			{sys, "user:fix the bug"},
			{sys, "user:fix the bug"},
		}, []string{".."}},
		// Same system prompt, another first question: another conversation.
		{"shared system prompt only", [][]string{
			{sys, "user:fix the bug"},
			{sys, "user:write the docs"},
		}, []string{".", "."}},
		// A prompt that forks from the middle of the history is a subagent;
		// its next prompts extend its own, the parent goes on with its own.
		{"subagent", [][]string{
			{sys, "user:fix the bug", "assistant:look", "user:file a"},
			{sys, "user:fix the bug", "assistant:look", "user:file a", "assistant:spawn", "user:ok"},
			{sys, "user:fix the bug", "user:subtask: read file b"},
			{sys, "user:fix the bug", "user:subtask: read file b", "assistant:read", "user:b says x"},
			{sys, "user:fix the bug", "assistant:look", "user:file a", "assistant:spawn", "user:ok", "assistant:result", "user:go on"},
		}, []string{"..[..]."}},
		// A subagent of a subagent nests.
		{"nested subagent", [][]string{
			{sys, "user:task", "assistant:a", "user:b"},
			{sys, "user:task", "user:sub"},
			{sys, "user:task", "user:sub", "assistant:c", "user:d"},
			{sys, "user:task", "user:sub", "user:subsub"},
		}, []string{".[..[.]]"}},
		// A prompt extending an earlier, not the latest, prompt of the parent
		// is a fork too (the agent went back in its history).
		{"branch from an earlier turn", [][]string{
			{sys, "user:task"},
			{sys, "user:task", "assistant:a", "user:b"},
			{sys, "user:task", "assistant:a", "user:b", "assistant:c", "user:d"},
			{sys, "user:task", "assistant:a", "user:b", "user:edited"},
		}, []string{"...[.]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sh := newShaper()
			cs := newConversations("rec", time.Hour)
			for _, p := range c.prompts {
				cs.add(sh.shape(t, msgs(p...)))
			}
			var got []string
			for _, f := range cs.closeAll() {
				got = append(got, layout(f.trace.Requests))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("conversations %q, want %q", got, c.want)
			}
			if len(cs.byPrefix) != 0 || len(cs.tips) != 0 {
				t.Errorf("after closing, %d prefixes and %d tips are still indexed", len(cs.byPrefix), len(cs.tips))
			}
		})
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// TestConversationIdentity: what makes a prompt the same as before. A
// cache_control marker moving between messages does not break a
// conversation; another model or other tools start a new one.
func TestConversationIdentity(t *testing.T) {
	sh := newShaper()
	cs := newConversations("rec", time.Hour)
	first := msgs("system:be careful", "user:fix it")
	cs.add(sh.shape(t, first))
	marked := msgs("system:be careful", "user:fix it", "assistant:ok", "user:go")
	marked[1]["cache_control"] = map[string]any{"type": "ephemeral"}
	cs.add(sh.shape(t, marked))
	other := msgs("system:be careful", "user:fix it", "assistant:ok", "user:go", "assistant:done", "user:more")
	cs.add(sh.shapeBody(t, other, map[string]any{"model": "other", "messages": other}))
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "read"}}}
	cs.add(sh.shapeBody(t, other, map[string]any{"model": "m", "messages": other, "tools": tools}))
	var got []string
	for _, f := range cs.closeAll() {
		got = append(got, layout(f.trace.Requests))
	}
	if fmt.Sprint(got) != "[.. . .]" {
		t.Errorf("conversations %q, want [.. . .]: the marker kept one, another model and other tools made two more", got)
	}
}

// TestTextBlocksIgnoreEscaping: the same text escaped two ways gives the
// same words and blocks; a word boundary inside an escape is one.
func TestTextBlocksIgnoreEscaping(t *testing.T) {
	seed := maphash.MakeSeed()
	words := strings.Repeat("alpha beta\ngamma ", 50)
	a := newBlockHasher(seed, 8)
	a.jsonString([]byte(`"` + strings.ReplaceAll(words, "\\n", "\\u000a") + `"`))
	a.jsonString([]byte(`"caf\u00e9 \/x"`))
	a.end()
	b := newBlockHasher(seed, 8)
	b.text([]byte(strings.ReplaceAll(words, "\\n", "\n")))
	b.text([]byte("caf\u00e9 /x"))
	b.end()
	if a.words != 152 || a.words != b.words || fmt.Sprint(a.blocks) != fmt.Sprint(b.blocks) {
		t.Errorf("escaped: %d words, %d blocks; plain: %d words, %d blocks", a.words, len(a.blocks), b.words, len(b.blocks))
	}
}
