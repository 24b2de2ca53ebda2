package sim

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Finish reasons, as vLLM labels vllm:request_success_total{finished_reason}.
const (
	finishStop   = "stop"
	finishLength = "length"
	finishAbort  = "abort"
)

// Bucket boundaries as vLLM v1 declares them (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{
		0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
	}
	tokenLatencyBuckets = []float64{
		0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
	}
	requestLatencyBuckets = []float64{
		0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
	}
	iterationTokenBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
)

// buckets125 returns 1, 2, 5, 10, 20, 50, ... up to max, like vLLM's
// build_1_2_5_buckets(max_model_len).
func buckets125(max int) []float64 {
	var out []float64
	for scale := 1; ; scale *= 10 {
		for _, m := range []int{1, 2, 5} {
			v := m * scale
			if v > max {
				return out
			}
			out = append(out, float64(v))
		}
	}
}

// metrics holds the simulator's Prometheus series on its own registry. Names,
// types, labels and buckets follow vLLM v1; every time is in modelled seconds.
type metrics struct {
	reg *prometheus.Registry

	running, waiting, kvUsage prometheus.Gauge

	prefixQueries, prefixHits, preemptions prometheus.Counter
	promptTokens, generationTokens         prometheus.Counter
	success                                map[string]prometheus.Counter

	ttft, itl, tpot                          prometheus.Observer
	e2e, queue, inference, prefill, decode   prometheus.Observer
	promptHist, generationHist, maxTokensReq prometheus.Observer
	iterationTokens                          prometheus.Observer

	http *prometheus.CounterVec

	lag, lagMax prometheus.Gauge
	iterations  prometheus.Counter
}

func newMetrics(p Profile) *metrics {
	reg := prometheus.NewRegistry()
	labels := []string{"model_name", "engine"}
	values := []string{p.Model, "0"}

	gauge := func(name, help string) prometheus.Gauge {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v.WithLabelValues(values...)
	}
	counter := func(name, help string) prometheus.Counter {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v.WithLabelValues(values...)
	}
	histogram := func(name, help string, buckets []float64) prometheus.Observer {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		reg.MustRegister(v)
		return v.WithLabelValues(values...)
	}
	tokenBuckets := buckets125(p.MaxModelLen)

	m := &metrics{reg: reg}
	m.running = gauge("vllm:num_requests_running", "Requests in the running batch.")
	m.waiting = gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.")
	m.kvUsage = gauge("vllm:kv_cache_usage_perc", "Fraction of KV-cache blocks held by requests (1 is full).")
	m.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.")
	m.prefixHits = counter("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.")
	m.preemptions = counter("vllm:num_preemptions_total", "Requests preempted (recompute) for lack of KV blocks.")
	m.promptTokens = counter("vllm:prompt_tokens_total", "Prompt tokens of requests that produced their first token.")
	m.generationTokens = counter("vllm:generation_tokens_total", "Generated tokens.")

	succ := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:request_success_total",
		Help: "Finished requests by finish reason.",
	}, append(append([]string{}, labels...), "finished_reason"))
	reg.MustRegister(succ)
	m.success = map[string]prometheus.Counter{}
	for _, r := range []string{finishStop, finishLength, finishAbort} {
		m.success[r] = succ.WithLabelValues(p.Model, "0", r)
	}

	m.ttft = histogram("vllm:time_to_first_token_seconds", "Time to first token (modelled seconds).", ttftBuckets)
	m.itl = histogram("vllm:inter_token_latency_seconds", "Time between successive output tokens (modelled seconds).", tokenLatencyBuckets)
	m.tpot = histogram("vllm:request_time_per_output_token_seconds", "Per request: decode time over output tokens after the first (modelled seconds).", tokenLatencyBuckets)
	m.e2e = histogram("vllm:e2e_request_latency_seconds", "Arrival to last token (modelled seconds).", requestLatencyBuckets)
	m.queue = histogram("vllm:request_queue_time_seconds", "Arrival to first scheduled (modelled seconds).", requestLatencyBuckets)
	m.inference = histogram("vllm:request_inference_time_seconds", "First scheduled to last token (modelled seconds).", requestLatencyBuckets)
	m.prefill = histogram("vllm:request_prefill_time_seconds", "First scheduled to first token (modelled seconds).", requestLatencyBuckets)
	m.decode = histogram("vllm:request_decode_time_seconds", "First token to last token (modelled seconds).", requestLatencyBuckets)
	m.promptHist = histogram("vllm:request_prompt_tokens", "Prompt tokens per finished request.", tokenBuckets)
	m.generationHist = histogram("vllm:request_generation_tokens", "Generated tokens per finished request.", tokenBuckets)
	m.maxTokensReq = histogram("vllm:request_params_max_tokens", "The max_tokens of finished requests.", tokenBuckets)
	m.iterationTokens = histogram("vllm:iteration_tokens_total", "Tokens (prefill plus decode) per engine iteration.", iterationTokenBuckets)

	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vllm:cache_config_info",
		Help: "KV cache configuration (value is always 1).",
	}, []string{"block_size", "cache_dtype", "enable_prefix_caching", "engine", "gpu_memory_utilization", "num_gpu_blocks"})
	reg.MustRegister(info)
	info.WithLabelValues(strconv.Itoa(p.BlockSize), "auto", "True", "0", "0.9", strconv.Itoa(p.KVCapacityTokens/p.BlockSize)).Set(1)

	m.http = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "http_requests_total",
		Help: "HTTP requests by handler, method and grouped status (2xx, 4xx, 5xx).",
	}, []string{"handler", "method", "status"})
	reg.MustRegister(m.http)

	m.lag = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "headroom_sim_lag_seconds",
		Help: "How far the simulated engine's modelled clock is behind wall time (modelled seconds); near zero when the host keeps up.",
	})
	m.lagMax = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "headroom_sim_lag_max_seconds",
		Help: "The largest lag seen since start (modelled seconds).",
	})
	m.iterations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "headroom_sim_iterations_total",
		Help: "Engine iterations run.",
	})
	reg.MustRegister(m.lag, m.lagMax, m.iterations)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// statusGroup turns 404 into "4xx", as prometheus-fastapi-instrumentator does.
func statusGroup(code int) string {
	switch {
	case code >= 500:
		return "5xx"
	case code >= 400:
		return "4xx"
	case code >= 300:
		return "3xx"
	case code >= 200:
		return "2xx"
	default:
		return "1xx"
	}
}
