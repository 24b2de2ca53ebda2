package canary

import (
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

// chatMessages is the part of a chat-completions request a key reads.
type chatMessages struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
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
	var m chatMessages
	if err := json.Unmarshal(body, &m); err != nil || len(m.Messages) == 0 {
		if len(body) == 0 {
			return 0, false
		}
		return maphash.Bytes(keySeed, body[:min(len(body), n)]), true
	}
	var hs maphash.Hash
	hs.SetSeed(keySeed)
	for _, msg := range m.Messages {
		_, _ = hs.WriteString(msg.Role)
		_, _ = hs.Write(msg.Content[:min(len(msg.Content), n)])
		if msg.Role != "system" && msg.Role != "developer" {
			break
		}
	}
	return hs.Sum64(), true
}
