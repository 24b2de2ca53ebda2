package sweep

import "math"

// Cost is what a session-hour and a million tokens cost at the bar.
type Cost struct {
	USDPerHour float64 `json:"usd_per_hour"`
	// USDPerSessionHour is the hourly price divided by the capacity; Lo and Hi
	// come from the capacity interval. Null when capacity is below the first step.
	USDPerSessionHour   *float64 `json:"usd_per_session_hour"`
	USDPerSessionHourLo *float64 `json:"usd_per_session_hour_lo,omitempty"`
	USDPerSessionHourHi *float64 `json:"usd_per_session_hour_hi,omitempty"`
	// AtMost is true when capacity is a lower bound, so the cost is an upper bound.
	AtMost bool `json:"at_most,omitempty"`
	// USDPerSessionHourAtLeast is set when no step held the bar (capacity
	// not established, USDPerSessionHour null): the hourly price over the
	// capacity interval's upper bound, the floor of an interval with no
	// upper end, since the recipe may hold no session at all.
	USDPerSessionHourAtLeast *float64 `json:"usd_per_session_hour_at_least,omitempty"`
	// USDPerMillionTokens counts cached input, uncached input and output tokens
	// from the server's counters at the last step that passed, as InferenceX does.
	USDPerMillionTokens *float64 `json:"usd_per_million_tokens"`
	TokensPerHour       float64  `json:"tokens_per_hour,omitempty"`
	// The tokens per hour split as InferenceX counts them.
	CachedInputPerHour   float64 `json:"cached_input_tokens_per_hour,omitempty"`
	UncachedInputPerHour float64 `json:"uncached_input_tokens_per_hour,omitempty"`
	OutputPerHour        float64 `json:"output_tokens_per_hour,omitempty"`
	FromStep             int     `json:"from_step_sessions,omitempty"`
}

// CostOf prices the capacity and the tokens of the last passing step;
// tokens are the server's counters over that step's judged time. A capacity
// that was not established (no step held the bar) gets no price per
// session-hour, only a floor with an open upper end.
//
// A recipe not priced (no GPUs stated, or no price per GPU-hour: an hourly
// price of 0) gets no dollar figure at all, not $0.00 per session-hour,
// which would rank it the cheapest of all.
func CostOf(nodes, gpusPerNode int, usdPerGPUHour float64, c Capacity, tokens Tokens, fromStep int) Cost {
	hourly := float64(nodes*gpusPerNode) * usdPerGPUHour
	priced := hourly > 0
	out := Cost{USDPerHour: hourly, AtMost: c.AtLeast}
	if priced && c.NotEstablished && c.Hi > 0 {
		out.USDPerSessionHourAtLeast = ptr(hourly / c.Hi)
	}
	if priced && c.Sessions > 0 && !c.BelowFirst && !c.NotEstablished {
		out.USDPerSessionHour = ptr(hourly / c.Sessions)
		if c.Hi > 0 {
			out.USDPerSessionHourLo = ptr(hourly / c.Hi)
		}
		if c.Lo > 0 {
			out.USDPerSessionHourHi = ptr(hourly / c.Lo)
		}
	}
	if tokens.PerHour > 0 && tokens.Seconds > 0 {
		perHour := 3600 / tokens.Seconds
		out.TokensPerHour = tokens.PerHour
		out.CachedInputPerHour = tokens.Cached * perHour
		out.UncachedInputPerHour = (tokens.Prompt - tokens.Cached) * perHour
		out.OutputPerHour = tokens.Output * perHour
		if priced {
			out.USDPerMillionTokens = ptr(hourly / tokens.PerHour * 1e6)
		}
		out.FromStep = fromStep
	}
	return out
}

func ptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
