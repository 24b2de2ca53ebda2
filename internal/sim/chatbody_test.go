package sim

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// slowChat is the reference reading of a body: encoding/json, then the scan.
func slowChat(buf []byte, blockSize int) (chatRequest, *promptScan, error) {
	var body chatRequest
	if err := json.NewDecoder(bytes.NewReader(buf)).Decode(&body); err != nil {
		return body, nil, err
	}
	scan := newPromptScan(blockSize, len(buf))
	for _, m := range body.Messages {
		scan.boundary(m.Role)
		if err := scan.addContent(m.Content); err != nil {
			return body, nil, err
		}
	}
	scan.finish()
	return body, scan, nil
}

// sameChat reports how two readings of one body differ, or "".
func sameChat(a chatRequest, as *promptScan, b chatRequest, bs *promptScan) string {
	if !reflect.DeepEqual(a, b) {
		return "requests differ"
	}
	if as.words != bs.words || !slices.Equal(as.hashes, bs.hashes) || as.digest() != bs.digest() {
		return "scans differ"
	}
	return ""
}

// chatBodies are request bodies as clients send them, and some that no
// client should.
var chatBodies = []struct {
	name string
	body string
	fast bool // the fast path must take it
}{
	{"headroom's shape", `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"a b  c\nd"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`, true},
	{"spaced, keys reordered", "{ \"stream\" : false ,\n \"messages\" : [ { \"content\" : \"x y\" , \"role\" : \"user\" } ] ,\r\n\t\"model\" : \"m\" }  ", true},
	{"escapes and unicode", `{"model":"m","messages":[{"role":"user","content":"tab\there \"q\" \\ \/ \u00e9\u2003x \ud83d\ude00 caf\u00e9 日本 語"}]}`, true},
	{"other message fields", `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":[1,2]}"}}]},{"role":"tool","tool_call_id":"c1","name":"f","content":"ok done"}],"max_completion_tokens":7}`, true},
	{"tools and tool_choice", `{"model":"m","messages":[{"role":"user","content":"Use the Edit tool"}],"tools":[{"type":"function","function":{"name":"Edit","parameters":{"type":"object","properties":{"p":{"type":"string"}}}}}],"tool_choice":{"type":"function","function":{"name":"Edit"}}}`, true},
	{"content parts", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"one two"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"three"}]}]}`, true},
	{"unknown fields and trailing data", `{"model":"m","temperature":0.7,"seed":-3e2,"stop":["a","b"],"logit_bias":{},"messages":[{"role":"user","content":"hi"}]} trailing`, true},
	{"nulls", `{"model":"m","max_tokens":null,"stream_options":null,"tools":null,"messages":[{"role":null,"content":"w"}]}`, true},
	// The slow path decides these: a key only a case fold matches, an
	// escaped key, a duplicate, a message that is not an object.
	{"folded key", `{"Model":"m","messages":[{"role":"user","content":"a"}]}`, false},
	{"escaped key", `{"mod\u0065l":"m","messages":[{"role":"user","content":"a"}]}`, false},
	{"duplicate messages", `{"model":"m","messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b c"}]}`, false},
	{"null message", `{"model":"m","messages":[null,{"role":"user","content":"a"}]}`, false},
	{"no messages", `{"model":"m","messages":[]}`, false},
	// Bodies the slow path refuses: the fast path must not take them.
	{"raw control character", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\x01b\"}]}", false},
	{"bad escape", `{"model":"m","messages":[{"role":"user","content":"a\qb"}]}`, false},
	{"bad skipped value", `{"model":"m","x":[1,],"messages":[{"role":"user","content":"a"}]}`, false},
	{"bad number", `{"model":"m","max_tokens":01,"messages":[{"role":"user","content":"a"}]}`, false},
	{"wrong type", `{"model":"m","max_tokens":"5","messages":[{"role":"user","content":"a"}]}`, false},
	{"number content", `{"model":"m","messages":[{"role":"user","content":5}]}`, false},
	{"truncated", `{"model":"m","messages":[{"role":"user","content":"a b`, false},
	{"not an object", `["model"]`, false},
	{"empty", ``, false},
}

// TestChatBodyMatchesDecoder: the fast path reads every body it takes
// exactly as encoding/json and the scan do (the same request, words, block
// hashes and digest), takes the shapes clients send, and leaves everything
// else, valid or not, to the slow path.
func TestChatBodyMatchesDecoder(t *testing.T) {
	for _, tc := range chatBodies {
		t.Run(tc.name, func(t *testing.T) {
			body, scan, ok := fastChat([]byte(tc.body), 4)
			if ok != tc.fast {
				t.Fatalf("fast path took it: %v, want %v", ok, tc.fast)
			}
			if !ok {
				return
			}
			want, wantScan, err := slowChat([]byte(tc.body), 4)
			if err != nil {
				t.Fatalf("the fast path took a body the decoder refuses: %v", err)
			}
			if d := sameChat(body, scan, want, wantScan); d != "" {
				t.Errorf("%s:\nfast %+v (%d words)\nslow %+v (%d words)", d, body, scan.words, want, wantScan.words)
			}
		})
	}
}

// FuzzChatBody: whatever the body, a fast reading is the slow one.
func FuzzChatBody(f *testing.F) {
	for _, tc := range chatBodies {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		body, scan, ok := fastChat(b, 4)
		if !ok {
			return
		}
		want, wantScan, err := slowChat(b, 4)
		if err != nil {
			t.Fatalf("fast path took %q, which the decoder refuses: %v", b, err)
		}
		if d := sameChat(body, scan, want, wantScan); d != "" {
			t.Fatalf("%s for %q", d, b)
		}
	})
}

// BenchmarkChatBody reads a heavy agent turn's body (135K words, about 1 MB)
// both ways: the wall time it takes is modelled time x the scale (at 100,
// 10 ms of parsing is a second of TTFT the client sees and the engine does
// not).
func BenchmarkChatBody(b *testing.B) {
	buf := chatJSON("m", words("w", 0, 135_000), 100, true)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			if _, _, ok := fastChat(buf, 16); !ok {
				b.Fatal("fast path refused the body")
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			if _, _, err := slowChat(buf, 16); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// bodyReader reads its bytes once, in any read sizes, then lets go of them.
func TestBodyReaderLetsGo(t *testing.T) {
	r := bodyReader([]byte("some body"))
	var got []byte
	p := make([]byte, 4)
	for {
		n, err := r.Read(p)
		got = append(got, p[:n]...)
		if err != nil {
			break
		}
	}
	if string(got) != "some body" || r.(*onceBody).b != nil {
		t.Errorf("read %q, holds %q", got, r.(*onceBody).b)
	}
}
