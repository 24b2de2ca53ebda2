// Package load replays sessions as closed-loop lanes over a streaming
// OpenAI-compatible client and writes one Record per request.
package load

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// RecordVersion is the version of the Record schema written to records.jsonl.
const RecordVersion = 1

// Phases a request can be sent in.
const (
	PhasePrime   = "prime"   // a lane's first request, max_tokens 1, to put its history in the cache
	PhaseWarmup  = "warmup"  // sent during a step's warm-up: not judged
	PhaseMeasure = "measure" // sent during a step's judged time
	PhaseDrain   = "drain"   // sent after the last step, while the run winds down
)

// Error classes of a Record. Every one of them counts as an error.
const (
	ErrRefused     = "refused"      // HTTP 4xx: the server turned the request away
	ErrServer      = "server_error" // HTTP 5xx
	ErrTimeout     = "timeout"      // the client deadline passed
	ErrAborted     = "aborted"      // the run cancelled the request
	ErrConnect     = "connect"      // the request never reached the server
	ErrStream      = "stream"       // the stream broke or carried an error
	ErrUnsent      = "unsent"       // a turn the failed conversation never sent, stamped when the lane would have sent it
	ErrNoUsage     = "no_usage"     // the stream ended without a usage chunk
	ErrEmptyAnswer = "empty_answer" // the stream ended without any token
)

// Record is one request as the load generator saw it: the contract between
// load, judging and reports. Times are modelled seconds since the run started.
type Record struct {
	V        int    `json:"v"`
	Step     int    `json:"step"`     // index of the step it was sent in
	Sessions int    `json:"sessions"` // that step's concurrent sessions
	Phase    string `json:"phase"`
	Lane     int    `json:"lane"`
	// Shard is the process that sent it in a sharded sweep (sweep.shards):
	// 0, omitted, for the coordinator, which also judges.
	Shard   int    `json:"shard,omitempty"`
	Session string `json:"session"` // trace id
	Tier    string `json:"tier"`
	Play    int    `json:"play"` // how many times this lane replayed a session before
	Turn    int    `json:"turn"`
	Agent   string `json:"agent,omitempty"` // subagent id, empty for the parent
	// Attempt is which try of its turn the request was: 0 for the first, 1
	// for the first retry (see RetryPolicy). Every try is a record of its own
	// and a failed one counts as an error.
	Attempt int `json:"attempt,omitempty"`

	PlannedPromptTokens int `json:"planned_prompt_tokens"`
	ServedPromptTokens  int `json:"served_prompt_tokens"` // usage.prompt_tokens
	CachedTokens        int `json:"cached_tokens"`        // usage.prompt_tokens_details.cached_tokens
	// IdealCachedTokens is what an ideal prefix cache would hold of the prompt,
	// from the trace's hash ids: the leading blocks an earlier prompt of the
	// same play already sent.
	IdealCachedTokens int `json:"ideal_cached_tokens"`
	MaxTokens         int `json:"max_tokens"`
	OutputTokens      int `json:"output_tokens"` // usage.completion_tokens
	// ReasoningTokens is the part of OutputTokens a reasoning model spent
	// thinking: usage.completion_tokens_details.reasoning_tokens (SGLang:
	// usage.reasoning_tokens); absent when the server does not say.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	// ReasoningChunks and AnswerChunks count the stream's token chunks that
	// carried only reasoning (delta.reasoning, delta.reasoning_content) and
	// those that carried answer (content, text, refusal, tool calls).
	ReasoningChunks int `json:"reasoning_chunks,omitempty"`
	AnswerChunks    int `json:"answer_chunks,omitempty"`

	Send       float64 `json:"send_s"`
	FirstToken float64 `json:"first_token_s,omitempty"` // the first token of any kind, reasoning included
	LastToken  float64 `json:"last_token_s,omitempty"`
	// FirstAnswer is when the first answer token came, written only when
	// reasoning came before it (otherwise it is FirstToken).
	FirstAnswer float64 `json:"first_answer_s,omitempty"`
	Status      int     `json:"status"` // HTTP status; 0 when none came back
	Error       string  `json:"error,omitempty"`
	Detail      string  `json:"detail,omitempty"`

	// Pending marks a request that went out and has no outcome yet; it is
	// never written to records.jsonl.
	Pending bool `json:"-"`
}

// Failed reports whether the request counts as an error.
func (r Record) Failed() bool { return r.Error != "" }

// ReachedServer reports whether the request got to the server at all.
func (r Record) ReachedServer() bool { return r.Error != ErrConnect && r.Error != ErrUnsent }

// TTFT is the client-side time to first token in modelled seconds, or 0.
func (r Record) TTFT() float64 {
	if r.FirstToken == 0 {
		return 0
	}
	return r.FirstToken - r.Send
}

// ReadRecords reads a records.jsonl file, checking each line's version.
func ReadRecords(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return DecodeRecords(f, path)
}

// DecodeRecords reads JSONL records from r; name is used in errors.
func DecodeRecords(r io.Reader, name string) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if rec.V != RecordVersion {
			return nil, fmt.Errorf("%s:%d: record version %d, this build reads %d", name, line, rec.V, RecordVersion)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return out, nil
}
