package signal

import (
	"fmt"
	"strings"
)

// VLLM is the mapping for vLLM v1's /metrics (and its API server's HTTP
// counters from prometheus-fastapi-instrumentator). Data-parallel engines
// carry an engine label and are summed.
func VLLM() Mapping {
	chat := func(status string) map[string]string {
		return map[string]string{"handler": "/v1/chat/completions", "status": status}
	}
	return Mapping{
		{Common: TTFT, Metric: "vllm:time_to_first_token_seconds", Kind: Histogram},
		{Common: TPOT, Metric: "vllm:request_time_per_output_token_seconds", Kind: Histogram},
		{Common: ITL, Metric: "vllm:inter_token_latency_seconds", Kind: Histogram},
		{Common: E2E, Metric: "vllm:e2e_request_latency_seconds", Kind: Histogram},
		{Common: Queue, Metric: "vllm:request_queue_time_seconds", Kind: Histogram},
		{Common: RequestsOK, Metric: "vllm:request_success_total", Match: map[string]string{"finished_reason": "stop|length"}, Kind: Counter},
		{Common: RequestsAborted, Metric: "vllm:request_success_total", Match: map[string]string{"finished_reason": "abort"}, Kind: Counter},
		{Common: HTTP2xx, Metric: "http_requests_total", Match: chat("2xx"), Kind: Counter},
		{Common: HTTP4xx, Metric: "http_requests_total", Match: chat("4xx"), Kind: Counter},
		{Common: HTTP5xx, Metric: "http_requests_total", Match: chat("5xx"), Kind: Counter},
		{Common: PromptTokens, Metric: "vllm:prompt_tokens_total", Kind: Counter},
		{Common: GenerationTokens, Metric: "vllm:generation_tokens_total", Kind: Counter},
		{Common: PrefixCacheHits, Metric: "vllm:prefix_cache_hits_total", Kind: Counter},
		{Common: PrefixCacheQueries, Metric: "vllm:prefix_cache_queries_total", Kind: Counter},
		{Common: Preemptions, Metric: "vllm:num_preemptions_total", Kind: Counter},
		{Common: Running, Metric: "vllm:num_requests_running", Kind: Gauge},
		{Common: Waiting, Metric: "vllm:num_requests_waiting", Kind: Gauge},
		{Common: KVCacheUsage, Metric: "vllm:kv_cache_usage_perc", Kind: Gauge},
	}
}

// SGLang is the mapping for SGLang's /metrics (names from
// python/sglang/srt/metrics/collector.py). Scheduler series carry tp_rank,
// pp_rank, moe_ep_rank and, with DP attention, dp_rank labels; each series is
// its own part and all are summed, which is right because by default only
// one scheduler per data-parallel group reports (with
// --enable-metrics-for-all-schedulers the running and queue gauges count
// each tensor-parallel rank). SGLang reports no HTTP status counters: errors
// come from aborted requests and the client. Recent SGLang has no per-request
// TPOT histogram, only inter-token latency (counted per token); older
// versions' sglang:time_per_output_token_seconds is mapped when present.
// sglang:num_requests_total counts every finished request, aborted ones
// possibly included. Prompt tokens are also the prefix cache's queries,
// cached tokens its hits.
func SGLang() Mapping {
	return Mapping{
		{Common: TTFT, Metric: "sglang:time_to_first_token_seconds", Kind: Histogram},
		{Common: TPOT, Metric: "sglang:time_per_output_token_seconds", Kind: Histogram},
		{Common: ITL, Metric: "sglang:inter_token_latency_seconds", Kind: Histogram},
		{Common: E2E, Metric: "sglang:e2e_request_latency_seconds", Kind: Histogram},
		{Common: Queue, Metric: "sglang:queue_time_seconds", Kind: Histogram},
		{Common: RequestsOK, Metric: "sglang:num_requests_total", Kind: Counter},
		{Common: RequestsAborted, Metric: "sglang:num_aborted_requests_total", Kind: Counter},
		{Common: PromptTokens, Metric: "sglang:prompt_tokens_total", Kind: Counter},
		{Common: GenerationTokens, Metric: "sglang:generation_tokens_total", Kind: Counter},
		{Common: PrefixCacheHits, Metric: "sglang:cached_tokens_total", Kind: Counter},
		{Common: PrefixCacheQueries, Metric: "sglang:prompt_tokens_total", Kind: Counter},
		{Common: Preemptions, Metric: "sglang:num_retracted_requests_total", Kind: Counter},
		{Common: Running, Metric: "sglang:num_running_reqs", Kind: Gauge},
		{Common: Waiting, Metric: "sglang:num_queue_reqs", Kind: Gauge},
		{Common: KVCacheUsage, Metric: "sglang:token_usage", Kind: Gauge},
	}
}

// Modelplane is the mapping for Modelplane's common modelplane_* names (its
// gateway's modelplane_frontend_* and the engines' series renamed by its
// collector). Modelplane publishes no list of them: modelplane_request_ttft_seconds,
// modelplane_frontend_ttft_seconds, modelplane_frontend_tpot_seconds and
// modelplane_frontend_requests_active are named in the reference report;
// every other name and label here is a guess in the same style, to be
// corrected with a mapping file (see LoadMapping) against a live /metrics.
// The bar's TTFT and TPOT come from the gateway (what callers see); the
// engines' TTFT is kept as engine_ttft_seconds. Prefill and decode engines
// carry a phase label, so prompt tokens are read off non-decode engines and
// output tokens off non-prefill ones, counting each request once.
func Modelplane() Mapping {
	code := func(re string) map[string]string { return map[string]string{"code": re} }
	return Mapping{
		{Common: TTFT, Metric: "modelplane_frontend_ttft_seconds", Kind: Histogram},
		{Common: TPOT, Metric: "modelplane_frontend_tpot_seconds", Kind: Histogram},
		{Common: EngineTTFT, Metric: "modelplane_request_ttft_seconds", Kind: Histogram},
		{Common: ITL, Metric: "modelplane_request_itl_seconds", Kind: Histogram},
		{Common: E2E, Metric: "modelplane_frontend_request_duration_seconds", Kind: Histogram},
		{Common: Queue, Metric: "modelplane_request_queue_seconds", Kind: Histogram},
		{Common: HTTP2xx, Metric: "modelplane_frontend_requests_total", Match: code("2.."), Kind: Counter},
		{Common: HTTP4xx, Metric: "modelplane_frontend_requests_total", Match: code("4.."), Kind: Counter},
		{Common: HTTP5xx, Metric: "modelplane_frontend_requests_total", Match: code("5.."), Kind: Counter},
		{Common: RequestsOK, Metric: "modelplane_requests_total", Match: map[string]string{"outcome": "success|stop|length"}, Kind: Counter},
		{Common: RequestsAborted, Metric: "modelplane_requests_total", Match: map[string]string{"outcome": "abort|aborted|cancelled"}, Kind: Counter},
		{Common: PromptTokens, Metric: "modelplane_prompt_tokens_total", Match: map[string]string{"phase": "!decode"}, Kind: Counter},
		{Common: GenerationTokens, Metric: "modelplane_generation_tokens_total", Match: map[string]string{"phase": "!prefill"}, Kind: Counter},
		{Common: PrefixCacheHits, Metric: "modelplane_prefix_cache_hits_total", Match: map[string]string{"phase": "!decode"}, Kind: Counter},
		{Common: PrefixCacheQueries, Metric: "modelplane_prefix_cache_queries_total", Match: map[string]string{"phase": "!decode"}, Kind: Counter},
		{Common: Preemptions, Metric: "modelplane_preemptions_total", Kind: Counter},
		{Common: Running, Metric: "modelplane_requests_running", Kind: Gauge},
		{Common: Waiting, Metric: "modelplane_requests_waiting", Kind: Gauge},
		{Common: RequestsActive, Metric: "modelplane_frontend_requests_active", Kind: Gauge},
		{Common: KVCacheUsage, Metric: "modelplane_kv_cache_usage", Kind: Gauge},
	}
}

// GenAI is the mapping for OpenTelemetry's gen_ai semantic conventions as a
// Prometheus exporter names them (dots to underscores, unit "s" as the
// _seconds suffix, attributes as labels: error.type -> error_type,
// gen_ai.token.type -> gen_ai_token_type), as gateways emit them. The
// server histograms are in seconds. Request outcomes come from the count of
// gen_ai.server.request.duration: without error_type a success, an HTTP
// status class as 4xx or 5xx, any other error type a failed request. Tokens
// are the sums of gen_ai.client.token.usage by token type.
func GenAI() Mapping {
	errType := func(re string) map[string]string { return map[string]string{"error_type": re} }
	const duration = "gen_ai_server_request_duration_seconds"
	return Mapping{
		{Common: TTFT, Metric: "gen_ai_server_time_to_first_token_seconds", Kind: Histogram},
		{Common: TPOT, Metric: "gen_ai_server_time_per_output_token_seconds", Kind: Histogram},
		{Common: E2E, Metric: duration, Kind: Histogram},
		{Common: RequestsOK, Metric: duration, Match: errType(""), Kind: Counter, Field: "count"},
		{Common: HTTP4xx, Metric: duration, Match: errType("4[0-9][0-9]"), Kind: Counter, Field: "count"},
		{Common: HTTP5xx, Metric: duration, Match: errType("5[0-9][0-9]"), Kind: Counter, Field: "count"},
		{Common: RequestsFailed, Metric: duration, Match: errType("!|[45][0-9][0-9]"), Kind: Counter, Field: "count"},
		{Common: PromptTokens, Metric: "gen_ai_client_token_usage", Match: map[string]string{"gen_ai_token_type": "input"}, Kind: Counter, Field: "sum"},
		{Common: GenerationTokens, Metric: "gen_ai_client_token_usage", Match: map[string]string{"gen_ai_token_type": "output"}, Kind: Counter, Field: "sum"},
	}
}

// MappingNames lists the names MappingByName knows.
func MappingNames() []string { return []string{"gen_ai", "modelplane", "sglang", "vllm"} }

// MappingByName returns a built-in mapping: vllm, sglang, modelplane or gen_ai.
func MappingByName(name string) (Mapping, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "vllm":
		return VLLM(), nil
	case "sglang":
		return SGLang(), nil
	case "modelplane":
		return Modelplane(), nil
	case "gen_ai":
		return GenAI(), nil
	}
	return nil, fmt.Errorf("no built-in metric mapping %q: use one of %s, or a mapping file", name, strings.Join(MappingNames(), ", "))
}
