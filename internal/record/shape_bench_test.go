package record

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkShape is the recorder's work for one request of an agent with a
// 10,000-word history in 30 messages, from its bytes to its shape.
func BenchmarkShape(b *testing.B) {
	v := newVocabulary(1)
	ms := msgs("system:" + v.words(4000))
	for range 14 {
		ms = append(ms, msgs("assistant:"+v.words(50), "user:"+v.words(380))...)
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": ms, "stream": true})
	resp := []byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10000,\"completion_tokens\":50}}\n\ndata: [DONE]\n\n")
	sh := newShaper()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		x := &exchange{arrival: time.Now(), end: time.Now(), req: body, resp: resp, reqDone: make(chan struct{}), status: 200}
		close(x.reqDone)
		if _, err := sh.r.shapeOf(x); err != nil {
			b.Fatal(err)
		}
	}
}
