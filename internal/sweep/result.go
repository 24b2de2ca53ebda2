package sweep

import (
	"errors"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// StepResult is one judged step.
type StepResult struct {
	Index        int          `json:"index"`
	Sessions     int          `json:"sessions"`
	Start        float64      `json:"start_s"`
	MeasureStart float64      `json:"measure_start_s"`
	End          float64      `json:"end_s"`
	Judged       verdict.Step `json:"judged"`
	Load         LoadSummary  `json:"load"`
	Tokens       Tokens       `json:"tokens"`
	Windows      int          `json:"windows"`
	Warmup       *Warmup      `json:"warmup,omitempty"`
	// RepeatOf is the index of the step this one repeats; its verdict pools
	// both runs' windows. -1 when it is no repeat.
	RepeatOf int `json:"repeat_of"`
	// Extended says why the judged time ran past the plan's step (a part
	// too close that more turns could decide), if it did.
	Extended string `json:"extended,omitempty"`
	// Killed says why the kill switch ended the step early, if it did.
	Killed string `json:"killed,omitempty"`
	// KilledBy is the bar part the kill switch's tripped limit watches (ttft
	// or errors): a step the kill switch ended fails on it.
	KilledBy string `json:"killed_by,omitempty"`
	// KVCacheMean is the mean KV cache use over the judged time.
	KVCacheMean float64 `json:"kv_cache_mean"`
	// KVCachePeak is the highest KV cache use of any scrape in the judged time.
	KVCachePeak float64 `json:"kv_cache_peak"`
	// KVFullWaitingS is the longest stretch of the judged time, in seconds
	// from its first scrape to its last, in which the KV cache stayed at or
	// above the plan's KVFull while requests waited.
	KVFullWaitingS float64 `json:"kv_full_waiting_s,omitempty"`
	// WaitingIdleS is the longest stretch in which requests waited and none
	// ran: the engine admitted nothing.
	WaitingIdleS float64 `json:"waiting_idle_s,omitempty"`

	// what the verdict was computed from, kept in memory to pool a repeat
	judgedWindows  []signal.Window
	judgedLoads    []verdict.LoadWindow
	judgedRequests []verdict.Request
}

// Warmup is how the lanes' priming went by the time a step's judged time began.
type Warmup struct {
	Primed   int     `json:"primed"`
	Pending  int     `json:"pending"`
	Failed   int     `json:"failed"`
	LongestS float64 `json:"longest_s"`
}

// ErrWarmupTooShort is returned when lanes were still priming when a step's
// judged time began: the warm-up would have eaten the step.
var ErrWarmupTooShort = errors.New("warm-up too short")

// LoadSummary is what the load generator sent and saw in a step's judged time.
type LoadSummary struct {
	Planned      int `json:"planned"`
	Sent         int `json:"sent"`
	NotReached   int `json:"not_reached"`
	Unsent       int `json:"unsent"`
	ClientErrors int `json:"client_errors"`
	// InFlight is the mean of requests in flight; per session it shows how much
	// parallel work each session really keeps open.
	InFlight           float64 `json:"in_flight_mean"`
	InFlightPerSession float64 `json:"in_flight_per_session"`
	// InFlightByTier is the mean of requests in flight of each tier's lanes.
	InFlightByTier map[string]float64 `json:"in_flight_by_tier,omitempty"`
	// ClientTTFTP90 is the client-side P90 TTFT, kept for cross-checks only.
	ClientTTFTP90 float64 `json:"client_ttft_p90_s,omitempty"`
	// PromptDrift is served/planned prompt tokens - 1 over successful turns.
	PromptDrift float64 `json:"prompt_drift"`
	// IdealHitRate is the share of prompt tokens an ideal prefix cache would
	// have held, from the traces' hash ids, over successful turns.
	IdealHitRate float64 `json:"ideal_hit_rate"`
	// Unfinished is how many of the turns sent had no outcome when the
	// judged time ended (still waiting or streaming); they count as sent.
	Unfinished int `json:"unfinished"`
}

// Tokens are the server's token counters over a step's judged time.
type Tokens struct {
	Prompt  float64 `json:"prompt"`
	Cached  float64 `json:"cached"`
	Output  float64 `json:"output"`
	Seconds float64 `json:"seconds"`
	PerHour float64 `json:"per_hour"`
}

// Result is a whole sweep.
type Result struct {
	Steps      []StepResult `json:"steps"`
	Capacity   Capacity     `json:"capacity"`
	PostFlight PostFlight   `json:"post_flight"`
	Warnings   []string     `json:"warnings,omitempty"`
	StopReason string       `json:"stop_reason"`
}
