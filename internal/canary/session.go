package canary

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"net/http"
)

// keySeed salts session keys; keys live only in this process's memory.
var keySeed = maphash.MakeSeed()

// Sessions says how a request is tied to its session, so that every request
// of a conversation goes to the copy that holds its cache.
type Sessions struct {
	// Header, when set and present on a request, is the session's id (an
	// agent or gateway that stamps its conversations, such as
	// X-Session-Id).
	Header string
	// PrefixBytes is how much of each leading message's content identifies
	// a conversation when the header is absent; 0 means 256.
	PrefixBytes int
}

// message is one chat message as a key reads it.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// leading decodes the request's messages up to and with the first that is
// not a system (or developer) message, and reads no further: a long
// history after it is never scanned. ok is false when the body is not a
// JSON object with a messages array.
func leading(body []byte) (msgs []message, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, false
		}
		if k != "messages" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, false
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil, false
		}
		for dec.More() {
			var m message
			if err := dec.Decode(&m); err != nil {
				return nil, false
			}
			msgs = append(msgs, m)
			if m.Role != "system" && m.Role != "developer" {
				break
			}
		}
		return msgs, len(msgs) > 0
	}
	return nil, false
}

// Key is the session a chat request belongs to, the way headroom record
// groups requests into conversations (docs/record.md): a conversation's
// later turns, and the subagents it forks, keep its system messages and its
// first other message, so those identify it. The key hashes the header's
// value when the request carries it, else the first PrefixBytes of every
// system message's content and of the first message after them. A body
// that is not a chat request is keyed by its own first bytes. ok is false
// when nothing identifies the request (no header and no messages).
func (s Sessions) Key(h http.Header, body []byte) (key uint64, ok bool) {
	if s.Header != "" {
		if v := h.Get(s.Header); v != "" {
			return maphash.String(keySeed, "h:"+v), true
		}
	}
	n := s.PrefixBytes
	if n <= 0 {
		n = 256
	}
	msgs, ok := leading(body)
	if !ok {
		if len(body) == 0 {
			return 0, false
		}
		return maphash.Bytes(keySeed, body[:min(len(body), n)]), true
	}
	var hs maphash.Hash
	hs.SetSeed(keySeed)
	for _, msg := range msgs {
		_, _ = hs.WriteString(msg.Role)
		_, _ = hs.Write(msg.Content[:min(len(msg.Content), n)])
	}
	return hs.Sum64(), true
}
