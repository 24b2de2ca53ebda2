package signal

import (
	"fmt"
	"strings"
)

// VLLM is the mapping for vLLM v1's /metrics (and its API server's HTTP
// counters from prometheus-fastapi-instrumentator). Data-parallel engines
// carry an engine label and are summed.
//
// vLLM labels vllm:request_success_total by finished_reason (stop, length,
// abort, error, repetition; vllm/v1/metrics/loggers.py), while independent
// stand-ins such as llm-d-inference-sim spell it finish_reason (with
// tool_calls and remote_decode). Each outcome has a rule per spelling, and
// the finish_reason rules skip series that carry finished_reason, so no
// series is counted twice. remote_decode (a prefill engine handing the
// request to a decode engine) counts nowhere: the decode side finishes it.
//
// Interactivity is judged on vllm:request_time_per_output_token_seconds,
// one observation per finished request of its decode time over its output
// tokens after the first (added by vllm-project/vllm PR 24015, when the
// per-token vllm:time_per_output_token_seconds became
// vllm:inter_token_latency_seconds). Inter-token latency is one observation
// per streamed output (several tokens with speculative decoding); it is
// judged on only where the per-request histogram is missing, derived as
// DerivedTPOT says.
func VLLM() Mapping {
	chat := func(status string) map[string]string {
		return map[string]string{"handler": "/v1/chat/completions", "status": status}
	}
	const success = "vllm:request_success_total"
	// finished is the rule pair for one outcome, one per label spelling.
	finished := func(common, reasons string) []Rule {
		return []Rule{
			{Common: common, Metric: success, Match: map[string]string{"finished_reason": reasons}, Kind: Counter},
			{Common: common, Metric: success, Match: map[string]string{"finish_reason": reasons, "finished_reason": ""}, Kind: Counter},
		}
	}
	m := Mapping{
		{Common: TTFT, Metric: "vllm:time_to_first_token_seconds", Kind: Histogram},
		{Common: TPOT, Metric: "vllm:request_time_per_output_token_seconds", Kind: Histogram},
		{Common: ITL, Metric: "vllm:inter_token_latency_seconds", Kind: Histogram},
		{Common: E2E, Metric: "vllm:e2e_request_latency_seconds", Kind: Histogram},
		{Common: Queue, Metric: "vllm:request_queue_time_seconds", Kind: Histogram},
		{Common: HTTP2xx, Metric: "http_requests_total", Match: chat("2xx"), Kind: Counter},
		{Common: HTTP4xx, Metric: "http_requests_total", Match: chat("4xx"), Kind: Counter},
		{Common: HTTP5xx, Metric: "http_requests_total", Match: chat("5xx"), Kind: Counter},
		{Common: PromptTokens, Metric: "vllm:prompt_tokens_total", Kind: Counter},
		{Common: GenerationTokens, Metric: "vllm:generation_tokens_total", Kind: Counter},
		{Common: PrefixCacheHits, Metric: "vllm:prefix_cache_hits_total", Kind: Counter},
		{Common: PrefixCacheQueries, Metric: "vllm:prefix_cache_queries_total", Kind: Counter},
		{Common: PromptTokensCached, Metric: "vllm:prompt_tokens_cached_total", Kind: Counter},
		{Common: Preemptions, Metric: "vllm:num_preemptions_total", Kind: Counter},
		{Common: Running, Metric: "vllm:num_requests_running", Kind: Gauge},
		{Common: Waiting, Metric: "vllm:num_requests_waiting", Kind: Gauge},
		{Common: KVCacheUsage, Metric: "vllm:kv_cache_usage_perc", Kind: Gauge},
	}
	m = append(m, finished(RequestsOK, "stop|length|repetition|tool_calls")...)
	m = append(m, finished(RequestsAborted, "abort")...)
	return append(m, finished(RequestsFailed, "error")...)
}

// SGLang is the mapping for SGLang's /metrics (names from
// python/sglang/srt/metrics/collector.py). Scheduler series carry tp_rank,
// pp_rank, moe_ep_rank and, with DP attention, dp_rank labels; each series is
// its own part and all are summed, which is right because by default only
// one scheduler per data-parallel group reports (with
// --enable-metrics-for-all-schedulers the running and queue gauges count
// each tensor-parallel rank). SGLang reports no HTTP status counters: errors
// come from aborted requests and the client.
//
// SGLang reports no per-request time per output token, only inter-token
// latency counted per token (TokenizerMetricsCollector's
// observe_inter_token_latency adds each streamed chunk's interval to the sum
// and its token count to the bucket of interval over tokens), so its
// interactivity is derived from that histogram's sum and count as
// DerivedTPOT says, and reports label it. Older SGLang had
// sglang:time_per_output_token_seconds instead (sgl-project/sglang PR 3988
// added inter-token latency, PR 4914 removed it), observed at every
// streamed chunk as the request's running mean: neither per request nor per
// token, so it is not mapped (a mapping file may map it to tpot_seconds
// knowing that).
//
// sglang:num_requests_total counts every finished request, aborted ones
// possibly included. Prompt tokens are also the prefix cache's queries,
// cached tokens its hits.
func SGLang() Mapping {
	return Mapping{
		{Common: TTFT, Metric: "sglang:time_to_first_token_seconds", Kind: Histogram},
		{Common: ITL, Metric: "sglang:inter_token_latency_seconds", Kind: Histogram,
			Note: "per token: SGLang reports no per-request time per output token; interactivity is " + DerivedTPOT},
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

// Modelplane is the mapping for the modelplane_* series Modelplane's
// per-cluster OpenTelemetry collector exports (names from its built-in
// metric statements; see docs/engines.md for where they were read). The
// bar's TTFT and TPOT come from the gateway's modelplane_frontend_* series
// (renamed gen_ai server histograms: what callers see); the engines' own
// TTFT (vLLM's only; a prefill engine's, not a decode engine's) is kept as
// engine_ttft_seconds. Request outcomes come
// from the count of modelplane_frontend_request_duration_seconds by
// error_type, as for gen_ai. Modelplane renames no inter-token latency, no
// finished-request counter and no HTTP status counter.
//
// Engine series carry deployment, replica, namespace, engine and role
// labels; engine is the engine's name in the ModelDeployment, and a
// PrefillDecode deployment has two engines, which Modelplane's docs name
// prefill and decode. Both see every prompt, so prompt tokens and prefix
// cache lookups are read off engines not named decode and output tokens off
// engines not named prefill, counting each request once; name them
// otherwise and override those rules with a mapping file.
func Modelplane() Mapping {
	errType := func(re string) map[string]string { return map[string]string{"error_type": re} }
	engine := func(re string) map[string]string { return map[string]string{"engine": re} }
	const duration = "modelplane_frontend_request_duration_seconds"
	return Mapping{
		{Common: TTFT, Metric: "modelplane_frontend_ttft_seconds", Kind: Histogram},
		{Common: TPOT, Metric: "modelplane_frontend_tpot_seconds", Kind: Histogram},
		{Common: EngineTTFT, Metric: "modelplane_request_ttft_seconds", Match: engine("!decode"), Kind: Histogram},
		{Common: E2E, Metric: duration, Kind: Histogram},
		{Common: Queue, Metric: "modelplane_request_queue_seconds", Kind: Histogram},
		{Common: RequestsOK, Metric: duration, Match: errType(""), Kind: Counter, Field: "count"},
		{Common: HTTP4xx, Metric: duration, Match: errType("4[0-9][0-9]"), Kind: Counter, Field: "count"},
		{Common: HTTP5xx, Metric: duration, Match: errType("5[0-9][0-9]"), Kind: Counter, Field: "count"},
		{Common: RequestsFailed, Metric: duration, Match: errType("!|[45][0-9][0-9]"), Kind: Counter, Field: "count"},
		{Common: PromptTokens, Metric: "modelplane_request_input_tokens", Match: engine("!decode"), Kind: Counter, Field: "sum"},
		{Common: GenerationTokens, Metric: "modelplane_request_output_tokens", Match: engine("!prefill"), Kind: Counter, Field: "sum"},
		{Common: PrefixCacheHits, Metric: "modelplane_prefix_cache_hits_total", Match: engine("!decode"), Kind: Counter},
		{Common: PrefixCacheQueries, Metric: "modelplane_prefix_cache_lookups_total", Match: engine("!decode"), Kind: Counter},
		{Common: Preemptions, Metric: "modelplane_requests_preempted_total", Kind: Counter},
		{Common: Running, Metric: "modelplane_requests_running", Kind: Gauge},
		{Common: Waiting, Metric: "modelplane_requests_waiting", Kind: Gauge},
		{Common: KVCacheUsage, Metric: "modelplane_kv_cache_utilization_ratio", Kind: Gauge},
	}
}

// GenAI is the mapping for OpenTelemetry's gen_ai semantic conventions as a
// Prometheus exporter names them (dots to underscores, unit "s" as the
// _seconds suffix, a "{token}" unit dropped, attributes as labels:
// error.type -> error_type, gen_ai.token.type -> gen_ai_token_type), as
// gateways emit them. The server histograms are in seconds. Request
// outcomes come from the count of gen_ai.server.request.duration: without
// error_type a success, an HTTP status code as 4xx or 5xx, any other error
// type (Envoy AI Gateway writes _OTHER for every failure) a failed request.
// Tokens are the sums of gen_ai.client.token.usage by token type.
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
