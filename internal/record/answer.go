package record

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
)

// answer is what the recorder reads of a chat answer: its usage, how it
// stopped, how many tool calls it made, and (for an estimate when usage is
// missing) how many stream events carried tokens and how many words it had.
type answer struct {
	usage                          bool
	promptTokens, completionTokens int
	events                         int // stream events that carried a token of any kind
	words                          int // words of a whole (not streamed) answer
	toolCalls                      int
	finish                         string
	text                           bool // the answer had content
}

type usageJSON struct {
	PromptTokens     *int `json:"prompt_tokens"`
	CompletionTokens *int `json:"completion_tokens"`
}

type deltaJSON struct {
	Content          *string        `json:"content"`
	ReasoningContent *string        `json:"reasoning_content"`
	Reasoning        *string        `json:"reasoning"`
	Refusal          *string        `json:"refusal"`
	ToolCalls        []toolCallJSON `json:"tool_calls"`
	FunctionCall     *functionJSON  `json:"function_call"`
}

type toolCallJSON struct {
	Index    *int         `json:"index"`
	ID       string       `json:"id"`
	Function functionJSON `json:"function"`
}

type functionJSON struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type choiceJSON struct {
	Index        int       `json:"index"`
	Delta        deltaJSON `json:"delta"`
	Message      deltaJSON `json:"message"`
	Text         *string   `json:"text"`
	FinishReason *string   `json:"finish_reason"`
}

type answerJSON struct {
	Choices []choiceJSON `json:"choices"`
	Usage   *usageJSON   `json:"usage"`
}

// parseAnswer reads a captured answer: an event stream or one JSON object,
// gzipped or not. What it cannot read it leaves out.
func parseAnswer(body []byte, contentType, encoding string) answer {
	var a answer
	if strings.EqualFold(strings.TrimSpace(encoding), "gzip") {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return a
		}
		plain, err := io.ReadAll(io.LimitReader(zr, maxAnswerBytes))
		if err != nil && len(plain) == 0 {
			return a
		}
		body = plain
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if strings.Contains(contentType, "text/event-stream") || bytes.HasPrefix(trimmed, []byte("data:")) {
		a.stream(body)
		return a
	}
	var v answerJSON
	if json.Unmarshal(trimmed, &v) != nil {
		return a
	}
	a.take(v, false)
	return a
}

// stream reads the data events of an event stream.
func (a *answer) stream(body []byte) {
	calls := map[[2]int]bool{}
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 || data[0] != '{' {
			continue // [DONE] and the like
		}
		var v answerJSON
		if json.Unmarshal(data, &v) != nil {
			continue
		}
		a.take(v, true)
		for _, c := range v.Choices {
			for k, tc := range c.Delta.ToolCalls {
				idx := k
				if tc.Index != nil {
					idx = *tc.Index
				}
				calls[[2]int{c.Index, idx}] = true
			}
			if c.Delta.FunctionCall != nil {
				calls[[2]int{c.Index, -1}] = true
			}
		}
	}
	a.toolCalls = len(calls)
}

// take adds one event (streamed) or the whole answer.
func (a *answer) take(v answerJSON, streamed bool) {
	if u := v.Usage; u != nil && u.PromptTokens != nil {
		a.usage = true
		a.promptTokens = *u.PromptTokens
		if u.CompletionTokens != nil {
			a.completionTokens = *u.CompletionTokens
		}
	}
	token := false
	for _, c := range v.Choices {
		d := c.Delta
		if !streamed {
			d = c.Message
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			a.finish = *c.FinishReason
		}
		for _, s := range []*string{d.Content, d.Refusal, c.Text} {
			if s != nil && *s != "" {
				a.text, token = true, true
				a.words += countWords(*s)
			}
		}
		for _, s := range []*string{d.ReasoningContent, d.Reasoning} {
			if s != nil && *s != "" {
				token = true
				a.words += countWords(*s)
			}
		}
		for _, tc := range d.ToolCalls {
			token = true
			a.words += countWords(tc.Function.Arguments) + 1
		}
		if d.FunctionCall != nil {
			token = true
			a.words += countWords(d.FunctionCall.Arguments) + 1
		}
		if !streamed {
			a.toolCalls += len(d.ToolCalls)
			if d.FunctionCall != nil {
				a.toolCalls++
			}
		}
	}
	if token && streamed {
		a.events++
	}
}

// estimate is the answer's length when the upstream sent no usage: one
// token per stream event that carried any (engines send one token per event
// unless they batch), else one per word of a whole answer.
func (a answer) estimate() int {
	if a.events > 0 {
		return a.events
	}
	return a.words
}

// stopReason gives the finish reason in the words of the Weka/AgentX traces
// (Anthropic's stop reasons).
func (a answer) stopReason() string {
	switch a.finish {
	case "tool_calls", "function_call":
		return "tool_use"
	case "stop":
		return "end_turn"
	case "length":
		return "max_tokens"
	}
	return a.finish
}

func countWords(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		if asciiSpace[s[i]] {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}
