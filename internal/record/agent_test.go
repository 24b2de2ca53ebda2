package record

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// scriptAgent is a scripted coding agent: a system prompt, tools, a task,
// then turns that each add the model's tool call and a tool result, with a
// subagent forked from the middle of its history. It records the ground
// truth the recording must reproduce.
type scriptAgent struct {
	url, key, model string
	rng             *rand.Rand
	vocab           *vocabulary
	tools           []map[string]any
	turns           int // the parent's turns
	forkAfter       int // the parent turn after which the subagent runs
	forkAt          int // messages of the parent's history the subagent starts from
	subTurns        int
	think           time.Duration
	noUsageEvery    int // every n-th request asks for no usage (0: all do)

	mu    sync.Mutex
	truth []sent // every request, in order
	sent  int
}

// sent is one request as the agent saw it.
type sent struct {
	agent          string // "" or "sub"
	turn           int
	prompt, cached int // from usage; 0 when none was asked for
	out            int
	toolCalls      int
}

// vocabulary makes the prompt words: letters g-z only, 7 to 10 of them, so
// none can be a part of anything the recorder writes (JSON keys, hex ids,
// numbers); every word used is remembered for the grep.
type vocabulary struct {
	mu   sync.Mutex
	rng  *rand.Rand
	used map[string]bool
}

func newVocabulary(seed uint64) *vocabulary {
	return &vocabulary{rng: rand.New(rand.NewPCG(seed, 1)), used: map[string]bool{}}
}

func (v *vocabulary) words(n int) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		l := 7 + v.rng.IntN(4)
		w := make([]byte, l)
		for k := range w {
			w[k] = byte('g' + v.rng.IntN(20))
		}
		v.used[string(w)] = true
		b.Write(w)
	}
	return b.String()
}

func (v *vocabulary) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.used))
	for w := range v.used {
		out = append(out, w)
	}
	return out
}

// run plays the whole session: the parent's turns, the subagent after
// turn forkAfter (the parent waits for it, as for a tool), and a last
// answer without tools.
func (a *scriptAgent) run(ctx context.Context) error {
	msgs := []map[string]any{
		{"role": "system", "content": a.vocab.words(150)},
		{"role": "user", "content": a.vocab.words(250)},
	}
	for turn := range a.turns {
		last := turn == a.turns-1
		calls, err := a.send(ctx, "", turn, msgs, !last)
		if err != nil {
			return err
		}
		if last {
			break
		}
		msgs = append(msgs, assistantWith(calls))
		for _, c := range calls {
			result := a.vocab.words(180 + a.rng.IntN(120))
			if turn == a.forkAfter {
				sub, err := a.subagent(ctx, msgs[:a.forkAt])
				if err != nil {
					return err
				}
				result = sub
			}
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.ID, "content": result})
		}
		time.Sleep(a.think)
	}
	return nil
}

// subagent runs from a copy of the parent's first messages plus its own
// task, and returns its report.
func (a *scriptAgent) subagent(ctx context.Context, from []map[string]any) (string, error) {
	msgs := append([]map[string]any(nil), from...)
	msgs = append(msgs, map[string]any{"role": "user", "content": a.vocab.words(120)})
	for turn := range a.subTurns {
		calls, err := a.send(ctx, "sub", turn, msgs, turn < a.subTurns-1)
		if err != nil {
			return "", err
		}
		if len(calls) == 0 {
			break
		}
		msgs = append(msgs, assistantWith(calls))
		for _, c := range calls {
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.ID, "content": a.vocab.words(200 + a.rng.IntN(100))})
		}
		time.Sleep(a.think)
	}
	return a.vocab.words(60), nil
}

type call struct {
	ID, Name, Args string
}

func assistantWith(calls []call) map[string]any {
	var tc []map[string]any
	for _, c := range calls {
		tc = append(tc, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args}})
	}
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": tc}
}

// send streams one request and returns the tool calls of its answer.
func (a *scriptAgent) send(ctx context.Context, agent string, turn int, msgs []map[string]any, tools bool) ([]call, error) {
	a.mu.Lock()
	n := a.sent
	a.sent++
	a.mu.Unlock()
	body := map[string]any{"model": a.model, "messages": msgs, "stream": true, "max_tokens": 40, "tools": a.tools}
	usage := a.noUsageEvery == 0 || n%a.noUsageEvery != a.noUsageEvery-1
	if usage {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	if !tools {
		body["tool_choice"] = "none"
	}
	data, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.url+"/v1/chat/completions", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b.String())
	}
	s := sent{agent: agent, turn: turn}
	calls := map[int]*call{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens        int `json:"prompt_tokens"`
				CompletionTokens    int `json:"completion_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			return nil, fmt.Errorf("chunk %q: %v", d, err)
		}
		if u := ch.Usage; u != nil {
			s.prompt, s.out, s.cached = u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				k := calls[tc.Index]
				if k == nil {
					k = &call{}
					calls[tc.Index] = k
				}
				k.ID += tc.ID
				k.Name += tc.Function.Name
				k.Args += tc.Function.Arguments
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []call
	for i := range len(calls) {
		if c := calls[i]; c != nil {
			out = append(out, *c)
		}
	}
	s.toolCalls = len(out)
	a.mu.Lock()
	a.truth = append(a.truth, s)
	a.mu.Unlock()
	return out, nil
}

// toolDefs offers two tools named with vocabulary words.
func toolDefs(v *vocabulary) []map[string]any {
	var out []map[string]any
	for range 2 {
		name := strings.ReplaceAll(v.words(2), " ", "_")
		out = append(out, map[string]any{"type": "function", "function": map[string]any{
			"name":        name,
			"description": v.words(30),
			"parameters": map[string]any{"type": "object", "properties": map[string]any{
				"path": map[string]any{"type": "string", "description": v.words(8)},
			}, "required": []string{"path"}},
		}})
	}
	return out
}
