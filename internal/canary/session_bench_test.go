package canary

import (
	"strings"
	"testing"
)

// BenchmarkSessionKey keys a chat request of about 100,000 prompt words
// (a long agent session's turn: a system message and a long history).
func BenchmarkSessionKey(b *testing.B) {
	history := strings.Repeat(`{"role":"assistant","content":"`+strings.Repeat("word ", 500)+`"},{"role":"user","content":"`+strings.Repeat("result ", 500)+`"},`, 100)
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("rule ", 2000) + `"},{"role":"user","content":"the task"},` + history + `{"role":"user","content":"go on"}],"stream":true}`)
	var s Sessions
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, ok := s.Key(nil, body); !ok {
			b.Fatal("no key")
		}
	}
}
