package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
)

// MooncakeBlockSize is the tokens per hash block of Mooncake traces.
const MooncakeBlockSize = 512

// A Mooncake trace (kvcache-ai/Mooncake, the FAST'25 release) is JSONL with
// one request per line:
//
//	{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 2353]}
//
// timestamp is the arrival in milliseconds from the first request, and
// hash_ids has one id per 512-token block, equal ids meaning equal prefixes.
// The format names no session, so Read groups lines into conversations:
//
//   - a line with a "session_id" (string or number; some converters add one)
//     joins the other lines of that id;
//   - otherwise a line continues the conversation whose latest request's hash
//     ids, all but the last (partial) block, are a prefix of the line's ids,
//     at least two blocks long (one shared block is only the common system
//     prompt), arriving no earlier and with a prompt no shorter; when several
//     qualify, the longest such prefix wins, then the latest conversation;
//   - any other line starts a conversation of its own.
//
// Each conversation becomes one Trace with id "FILE:LINE" (the file's base
// name and the line of its first request), block_size 512, and one model call
// (type "s") per line: t is seconds from the conversation's first arrival and
// think_time the gap since the previous arrival of the conversation, which
// over-states thinking by the previous request's serving time, unknown to
// the format.
type mooncakeLine struct {
	Timestamp    *float64        `json:"timestamp"`
	InputLength  *int            `json:"input_length"`
	OutputLength *int            `json:"output_length"`
	HashIDs      *[]int64        `json:"hash_ids"`
	SessionID    json.RawMessage `json:"session_id"`
}

// isMooncake reports whether a first line looks like a Mooncake request
// rather than a Weka/AgentX trace.
func isMooncake(line []byte) bool {
	return bytes.Contains(line, []byte(`"input_length"`)) && !bytes.Contains(line, []byte(`"requests"`))
}

// mooncake gathers the conversations of one Mooncake input.
type mooncake struct {
	name     string
	convs    []*conversation
	byKey    map[string]int  // session_id -> conversation
	byPrefix map[int64][]int // id of a latest request's last full block -> conversations
}

type conversation struct {
	line    int // of the first request
	first   float64
	last    float64 // timestamp (ms) of the latest request
	reqs    []Request
	lastIDs []int64
}

func newMooncake(name string) *mooncake {
	return &mooncake{name: name, byKey: map[string]int{}, byPrefix: map[int64][]int{}}
}

// line decodes and places one Mooncake request.
func (m *mooncake) line(data []byte, lineNo int) error {
	at := fmt.Sprintf("%s:%d", m.name, lineNo)
	if data[0] != '{' {
		return fmt.Errorf("%s: a Mooncake line must hold one JSON request object, found %q", at, clip(data))
	}
	var l mooncakeLine
	if err := json.Unmarshal(data, &l); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				field = "request"
			}
			return fmt.Errorf("%s: %s: is a JSON %s, want %s; fix the field's type", at, field, te.Value, jsonKind(te.Type.Kind().String()))
		case errors.As(err, &se):
			return fmt.Errorf("%s: not valid JSON at byte %d of the line: %v; fix or drop the line", at, se.Offset, err)
		default:
			return fmt.Errorf("%s: %v", at, err)
		}
	}
	switch {
	case l.Timestamp == nil:
		return fmt.Errorf("%s: timestamp: missing; give the arrival in milliseconds", at)
	case *l.Timestamp < 0:
		return fmt.Errorf("%s: timestamp: must be >= 0, got %g", at, *l.Timestamp)
	case l.InputLength == nil:
		return fmt.Errorf("%s: input_length: missing; give the prompt tokens", at)
	case *l.InputLength < 0:
		return fmt.Errorf("%s: input_length: must be >= 0, got %d", at, *l.InputLength)
	case l.OutputLength == nil:
		return fmt.Errorf("%s: output_length: missing; give the answer tokens", at)
	case *l.OutputLength < 0:
		return fmt.Errorf("%s: output_length: must be >= 0, got %d", at, *l.OutputLength)
	case l.HashIDs == nil:
		return fmt.Errorf("%s: hash_ids: missing; give one id per 512-token block ([] for none)", at)
	}
	ts, in, ids := *l.Timestamp, *l.InputLength, *l.HashIDs
	key := string(bytes.TrimSpace(l.SessionID))
	if key == "null" {
		key = ""
	}
	if key != "" && key[0] != '"' && (key[0] < '0' || key[0] > '9') && key[0] != '-' {
		return fmt.Errorf("%s: session_id: must be a string or a number, got %s", at, clip([]byte(key)))
	}

	ci := -1
	if key != "" {
		if i, ok := m.byKey[key]; ok {
			ci = i
			if c := m.convs[i]; ts < c.last {
				return fmt.Errorf("%s: timestamp: %g is before the previous request of session_id %s (%g); sort each session by arrival", at, ts, key, c.last)
			}
		}
	} else {
		ci = m.continues(ids, ts, in)
	}
	if ci < 0 {
		ci = len(m.convs)
		m.convs = append(m.convs, &conversation{line: lineNo, first: ts, last: ts})
		if key != "" {
			m.byKey[key] = ci
		}
	}
	c := m.convs[ci]
	r := Request{T: (ts - c.first) / 1000, Type: "s", In: in, Out: *l.OutputLength, HashIDs: ids}
	if len(c.reqs) > 0 {
		r.ThinkTime = (ts - c.last) / 1000
	}
	c.reqs = append(c.reqs, r)
	c.last, c.lastIDs = ts, ids
	if key == "" && len(ids) >= 3 {
		k := ids[len(ids)-2]
		m.byPrefix[k] = append(m.byPrefix[k], ci)
	}
	return nil
}

// continues finds the conversation a session-less request continues, or -1.
func (m *mooncake) continues(ids []int64, ts float64, in int) int {
	for j := len(ids) - 1; j >= 1; j-- {
		cands := m.byPrefix[ids[j]]
		for k := len(cands) - 1; k >= 0; k-- {
			c := m.convs[cands[k]]
			prev := c.lastIDs
			if len(prev)-2 != j || ts < c.last || in < c.reqs[len(c.reqs)-1].In {
				continue // a stale key, or not a continuation
			}
			if slices.Equal(prev[:j+1], ids[:j+1]) {
				return cands[k]
			}
		}
	}
	return -1
}

// traces turns the conversations into traces, in the order of their first
// lines.
func (m *mooncake) traces() []Trace {
	base := filepath.Base(m.name)
	out := make([]Trace, 0, len(m.convs))
	for _, c := range m.convs {
		t := Trace{ID: fmt.Sprintf("%s:%d", base, c.line), BlockSize: MooncakeBlockSize, Requests: c.reqs}
		shareHashIDs(t.Requests)
		out = append(out, t)
	}
	return out
}
