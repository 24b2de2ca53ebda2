// Package trace reads and writes agentic-coding traces (the Weka/AgentX JSON
// format), flattens them into the turns a replay sends, cuts them into tiers by
// prompt length with their statistics, and synthesises AgentX-like sessions.
package trace

import "encoding/json"

// DefaultBlockSize is the tokens per hash block of Weka/AgentX traces, used
// when a trace leaves block_size out.
const DefaultBlockSize = 64

// Trace is one recorded agent session in the Weka/AgentX format.
type Trace struct {
	ID           string    `json:"id"`
	Models       []string  `json:"models,omitempty"`
	BlockSize    int       `json:"block_size"`
	HashIDScope  string    `json:"hash_id_scope,omitempty"`
	ToolTokens   int       `json:"tool_tokens"`
	SystemTokens int       `json:"system_tokens"`
	Requests     []Request `json:"requests"`
	// Totals is the producer's summary block, kept verbatim so it round-trips.
	Totals json.RawMessage `json:"totals,omitempty"`
}

// Request is one model call of a session, or (Type == "subagent") a subagent
// entry that nests the subagent's own requests.
//
// Requests of one trace may share the storage of their HashIDs (a prompt's ids
// usually extend the previous prompt's); treat HashIDs as read-only.
type Request struct {
	T           float64  `json:"t"`
	Type        string   `json:"type"`
	Model       string   `json:"model,omitempty"`
	In          int      `json:"in"`
	Out         int      `json:"out"`
	HashIDs     []int64  `json:"hash_ids"`
	InputTypes  []string `json:"input_types,omitempty"`
	OutputTypes []string `json:"output_types,omitempty"`
	Stop        string   `json:"stop,omitempty"`
	APITime     float64  `json:"api_time,omitempty"`
	ThinkTime   float64  `json:"think_time"`
	TTFT        *float64 `json:"ttft,omitempty"`

	// Subagent entry fields (Type == SubagentType).
	AgentID      string    `json:"agent_id,omitempty"`
	SubagentType string    `json:"subagent_type,omitempty"`
	Status       string    `json:"status,omitempty"`
	DurationMS   float64   `json:"duration_ms,omitempty"`
	TotalTokens  int       `json:"total_tokens,omitempty"`
	ToolUseCount int       `json:"tool_use_count,omitempty"`
	Models       []string  `json:"models,omitempty"`
	ToolTokens   int       `json:"tool_tokens,omitempty"`
	SystemTokens int       `json:"system_tokens,omitempty"`
	Requests     []Request `json:"requests,omitempty"`
}

// Subagent is the Type of a request entry that nests a subagent's requests.
const Subagent = "subagent"

// IsSubagent reports whether r is a subagent entry rather than a model call.
func (r Request) IsSubagent() bool { return r.Type == Subagent }

// modelCall is the wire form of a model call: only its own fields.
type modelCall struct {
	T           float64  `json:"t"`
	Type        string   `json:"type"`
	Model       string   `json:"model,omitempty"`
	In          int      `json:"in"`
	Out         int      `json:"out"`
	HashIDs     []int64  `json:"hash_ids"`
	InputTypes  []string `json:"input_types,omitempty"`
	OutputTypes []string `json:"output_types,omitempty"`
	Stop        string   `json:"stop,omitempty"`
	APITime     float64  `json:"api_time,omitempty"`
	ThinkTime   float64  `json:"think_time"`
	TTFT        *float64 `json:"ttft,omitempty"`
}

// subagentEntry is the wire form of a subagent entry: only its own fields.
type subagentEntry struct {
	T            float64   `json:"t"`
	Type         string    `json:"type"`
	AgentID      string    `json:"agent_id"`
	SubagentType string    `json:"subagent_type,omitempty"`
	DurationMS   float64   `json:"duration_ms"`
	TotalTokens  int       `json:"total_tokens"`
	ToolUseCount int       `json:"tool_use_count"`
	Status       string    `json:"status,omitempty"`
	Models       []string  `json:"models,omitempty"`
	ToolTokens   int       `json:"tool_tokens"`
	SystemTokens int       `json:"system_tokens"`
	Requests     []Request `json:"requests"`
}

// MarshalJSON writes a model call or a subagent entry with only the fields of
// its kind, as the format has them.
func (r Request) MarshalJSON() ([]byte, error) {
	if r.IsSubagent() {
		reqs := r.Requests
		if reqs == nil {
			reqs = []Request{}
		}
		return json.Marshal(subagentEntry{
			T: r.T, Type: r.Type, AgentID: r.AgentID, SubagentType: r.SubagentType,
			DurationMS: r.DurationMS, TotalTokens: r.TotalTokens, ToolUseCount: r.ToolUseCount,
			Status: r.Status, Models: r.Models, ToolTokens: r.ToolTokens, SystemTokens: r.SystemTokens,
			Requests: reqs,
		})
	}
	ids := r.HashIDs
	if ids == nil {
		ids = []int64{}
	}
	return json.Marshal(modelCall{
		T: r.T, Type: r.Type, Model: r.Model, In: r.In, Out: r.Out, HashIDs: ids,
		InputTypes: r.InputTypes, OutputTypes: r.OutputTypes, Stop: r.Stop,
		APITime: r.APITime, ThinkTime: r.ThinkTime, TTFT: r.TTFT,
	})
}
