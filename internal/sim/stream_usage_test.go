package sim

import (
	"encoding/json"
	"testing"
)

// The usage chunk written by hand is the one json.Marshal writes, whatever
// the model's name holds (quotes, HTML characters, non-ASCII, U+2028).
func TestUsageChunkMatchesMarshal(t *testing.T) {
	type chunk struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []string `json:"choices"`
		Usage   usage    `json:"usage"`
	}
	for i, model := range []string{"glm-5.3", `a"b\c`, "<x&y>", "modèle\u2028\x01", "\xff"} {
		resp := &response{model: model, id: "chatcmpl-0123456789abcdef", created: int64(1764600000 + i)}
		u := usage{PromptTokens: 1000 * i, CompletionTokens: 7 + i}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		u.PromptTokensDetails.CachedTokens = 900 * i
		b, err := json.Marshal(chunk{resp.id, "chat.completion.chunk", resp.created, resp.model, []string{}, u})
		if err != nil {
			t.Fatal(err)
		}
		want := "data: " + string(b) + "\n\n"
		if got := string(appendUsageChunk([]byte("x"), resp, u)); got != "x"+want {
			t.Errorf("model %q: wrote\n%s\nwant\n%s", model, got, "x"+want)
		}
	}
}
