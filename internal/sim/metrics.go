package sim

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Finish reasons, as vLLM labels vllm:request_success_total{finished_reason}.
const (
	finishStop   = "stop"
	finishLength = "length"
	finishAbort  = "abort"
	// finishToolCalls is the API's finish reason for an answer that ends in
	// a tool call; the engine saw a stop, and counts it as one.
	finishToolCalls = "tool_calls"
)

// Sources of prompt tokens, as vLLM labels vllm:prompt_tokens_by_source_total.
const (
	sourceCompute  = "local_compute"
	sourceCacheHit = "local_cache_hit"
	sourceExternal = "external_kv_transfer"
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

// metrics holds the simulator's Prometheus series on its own registry. The
// engine feeds every field; a personality registers the series its engine
// exposes, with that engine's names, labels and buckets, and leaves the rest
// unregistered (fed and never shown). Every time is in modelled seconds.
type metrics struct {
	reg  *simRegistry
	page pageWriter

	running, waiting, kvUsage prometheus.Gauge
	usedTokens, cacheHitRate  prometheus.Gauge // SGLang's num_used_tokens and cache_hit_rate

	prefixQueries, prefixHits, preemptions prometheus.Counter
	promptTokens, generationTokens         prometheus.Counter // prompt tokens at the first token, generated tokens as sampled (vLLM)
	promptCached                           prometheus.Counter // with promptTokens: those served from a cache or a prefill engine
	promptBySource                         map[string]prometheus.Counter
	// At a request's end (SGLang's tokenizer counts there).
	promptTokensDone, generationTokensDone, cachedTokensDone prometheus.Counter
	success                                                  map[string]prometheus.Counter // by engine finish reason

	ttft, itl, tpot                          prometheus.Observer
	e2e, queue, inference, prefill, decode   prometheus.Observer
	queueAtAdmit                             prometheus.Observer // SGLang observes queue time when a request is scheduled
	promptHist, generationHist, maxTokensReq prometheus.Observer
	iterationTokens                          prometheus.Observer
	retractions                              prometheus.Observer // preemptions per finished request (SGLang)

	http *seriesFamily // a counter family by handler, method and status

	lag, lagMax prometheus.Gauge
	iterations  prometheus.Counter
	hostHits    prometheus.Counter  // prompt tokens served from the host cache tier
	apiTTFT     prometheus.Observer // the HTTP handler's start to the first token's chunk flushed

	// hits and queries since start, for SGLang's cache_hit_rate gauge.
	hitTokens, queryTokens float64
}

// unregistered returns metrics whose every series is fed and never exposed;
// each personality replaces the ones its engine has.
func unregistered() *metrics {
	g := func() prometheus.Gauge { return single(dto.MetricType_GAUGE, "unexposed", "", nil).gauge() }
	c := func() prometheus.Counter { return single(dto.MetricType_COUNTER, "unexposed", "", nil).counter() }
	h := func() prometheus.Observer { return single(dto.MetricType_HISTOGRAM, "unexposed", "", nil).histogram() }
	m := &metrics{
		reg:     newSimRegistry(),
		running: g(), waiting: g(), kvUsage: g(), usedTokens: g(), cacheHitRate: g(),
		prefixQueries: c(), prefixHits: c(), preemptions: c(), promptTokens: c(), generationTokens: c(), promptCached: c(),
		promptBySource:   map[string]prometheus.Counter{sourceCompute: c(), sourceCacheHit: c(), sourceExternal: c()},
		promptTokensDone: c(), generationTokensDone: c(), cachedTokensDone: c(),
		success: map[string]prometheus.Counter{finishStop: c(), finishLength: c(), finishAbort: c()},
		ttft:    h(), itl: h(), tpot: h(), e2e: h(), queue: h(), inference: h(), prefill: h(), decode: h(),
		queueAtAdmit: h(), promptHist: h(), generationHist: h(), maxTokensReq: h(), iterationTokens: h(), retractions: h(),
		http: newSeriesFamily(dto.MetricType_COUNTER, "unexposed", "", []string{"handler", "method", "status"}, nil),
	}
	lag := single(dto.MetricType_GAUGE, "headroom_sim_lag_seconds",
		"How far the simulated engine's modelled clock is behind wall time (modelled seconds); near zero when the host keeps up.", nil)
	lagMax := single(dto.MetricType_GAUGE, "headroom_sim_lag_max_seconds",
		"The largest lag seen since start (modelled seconds).", nil)
	iterations := single(dto.MetricType_COUNTER, "headroom_sim_iterations_total", "Engine iterations run.", nil)
	m.lag, m.lagMax, m.iterations = lag.gauge(), lagMax.gauge(), iterations.counter()
	// Registered by whoever serves a host cache tier.
	m.hostHits = single(dto.MetricType_COUNTER, "headroom_sim_host_cache_hit_tokens_total",
		"Prompt tokens served from the host-memory cache tier (copied in, not recomputed); also counted as prefix cache hits.", nil).counter()
	api := single(dto.MetricType_HISTOGRAM, "headroom_sim_api_time_to_first_token_seconds",
		"Streamed requests: from the HTTP handler's start (before the body is read) to the first token's chunk flushed (modelled seconds). Unlike the engine's TTFT it holds reading and parsing the request and handing the token to the stream, wall time the time scale multiplies.",
		ttftBuckets)
	m.apiTTFT = api.histogram()
	m.reg.MustRegister(lag, lagMax, iterations, api)
	return m
}

// single is a family with no labels.
func single(kind dto.MetricType, name, help string, buckets []float64) *seriesFamily {
	return newSeriesFamily(kind, name, help, nil, buckets)
}

// family registers metric families that share one label set and value set.
type family struct {
	reg    *simRegistry
	labels []string
	values []string
}

func (f family) gauge(name, help string) prometheus.Gauge {
	return f.register(dto.MetricType_GAUGE, name, help, nil).gauge(f.values...)
}

func (f family) counter(name, help string) prometheus.Counter {
	return f.register(dto.MetricType_COUNTER, name, help, nil).counter(f.values...)
}

func (f family) histogram(name, help string, buckets []float64) prometheus.Observer {
	return f.register(dto.MetricType_HISTOGRAM, name, help, buckets).histogram(f.values...)
}

// register registers a family with f's labels and the extra ones.
func (f family) register(kind dto.MetricType, name, help string, buckets []float64, extra ...string) *seriesFamily {
	v := newSeriesFamily(kind, name, help, append(append([]string{}, f.labels...), extra...), buckets)
	f.reg.MustRegister(v)
	return v
}

// newMetrics registers vLLM v1's series (vllm/v1/metrics/loggers.py) and the
// API server's http_requests_total.
func newMetrics(p Profile) *metrics {
	m := unregistered()
	reg := m.reg
	f := family{reg, []string{"model_name", "engine"}, []string{p.Model, "0"}}
	tokenBuckets := buckets125(p.MaxModelLen)

	m.running = f.gauge("vllm:num_requests_running", "Requests in the running batch.")
	m.waiting = f.gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.")
	m.kvUsage = f.gauge("vllm:kv_cache_usage_perc", "Fraction of KV-cache blocks held by requests (1 is full).")
	m.prefixQueries = f.counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.")
	m.prefixHits = f.counter("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.")
	m.preemptions = f.counter("vllm:num_preemptions_total", "Requests preempted (recompute) for lack of KV blocks.")
	m.promptTokens = f.counter("vllm:prompt_tokens_total", "Prompt tokens of requests that produced their first token.")
	m.promptCached = f.counter("vllm:prompt_tokens_cached_total", "Cached prompt tokens (local and external) of requests that produced their first token.")
	bySource := f.register(dto.MetricType_COUNTER, "vllm:prompt_tokens_by_source_total",
		"Prompt tokens of requests that produced their first token, by where their KV came from.", nil, "source")
	for _, src := range []string{sourceCompute, sourceCacheHit, sourceExternal} {
		m.promptBySource[src] = bySource.counter(p.Model, "0", src)
	}
	m.generationTokens = f.counter("vllm:generation_tokens_total", "Generated tokens.")

	succ := f.register(dto.MetricType_COUNTER, "vllm:request_success_total", "Finished requests by finish reason.", nil, "finished_reason")
	for _, r := range []string{finishStop, finishLength, finishAbort} {
		m.success[r] = succ.counter(p.Model, "0", r)
	}

	m.ttft = f.histogram("vllm:time_to_first_token_seconds", "Time to first token (modelled seconds).", ttftBuckets)
	m.itl = f.histogram("vllm:inter_token_latency_seconds", "Time between successive output tokens (modelled seconds).", tokenLatencyBuckets)
	m.tpot = f.histogram("vllm:request_time_per_output_token_seconds", "Per request: decode time over output tokens after the first (modelled seconds).", tokenLatencyBuckets)
	m.e2e = f.histogram("vllm:e2e_request_latency_seconds", "Arrival to last token (modelled seconds).", requestLatencyBuckets)
	m.queue = f.histogram("vllm:request_queue_time_seconds", "Arrival to first scheduled (modelled seconds).", requestLatencyBuckets)
	m.inference = f.histogram("vllm:request_inference_time_seconds", "First scheduled to last token (modelled seconds).", requestLatencyBuckets)
	m.prefill = f.histogram("vllm:request_prefill_time_seconds", "First scheduled to first token (modelled seconds).", requestLatencyBuckets)
	m.decode = f.histogram("vllm:request_decode_time_seconds", "First token to last token (modelled seconds).", requestLatencyBuckets)
	m.promptHist = f.histogram("vllm:request_prompt_tokens", "Prompt tokens per finished request.", tokenBuckets)
	m.generationHist = f.histogram("vllm:request_generation_tokens", "Generated tokens per finished request.", tokenBuckets)
	m.maxTokensReq = f.histogram("vllm:request_params_max_tokens", "The max_tokens of finished requests.", tokenBuckets)
	m.iterationTokens = f.histogram("vllm:iteration_tokens_total", "Tokens (prefill plus decode) per engine iteration.", iterationTokenBuckets)

	info := newSeriesFamily(dto.MetricType_GAUGE, "vllm:cache_config_info", "KV cache configuration (value is always 1).",
		[]string{"block_size", "cache_dtype", "enable_prefix_caching", "engine", "gpu_memory_utilization", "num_gpu_blocks"}, nil)
	reg.MustRegister(info)
	info.gauge(strconv.Itoa(p.BlockSize), "auto", "True", "0", "0.9", strconv.Itoa(p.KVCapacityTokens/p.BlockSize)).Set(1)

	m.http = newSeriesFamily(dto.MetricType_COUNTER, "http_requests_total",
		"HTTP requests by handler, method and grouped status (2xx, 4xx, 5xx).", []string{"handler", "method", "status"}, nil)
	reg.MustRegister(m.http)
	return m
}

// SGLang's default bucket boundaries (python/sglang/srt/metrics/collector.py).
var (
	sglangTTFTBuckets = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	sglangE2EBuckets  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}
	sglangITLBuckets  = []float64{
		0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
		0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
	}
	sglangQueueBuckets = []float64{
		0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
		200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
	}
	sglangRetractionBuckets = []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 75, 100}
)

// newSGLangMetrics registers SGLang's series as `--enable-metrics` exposes
// them: the tokenizer manager's (label model_name; counted when a request
// ends) and the scheduler's (labels engine_type, model_name, tp_rank,
// pp_rank, moe_ep_rank of the one reporting rank). SGLang serves no HTTP
// status counters.
func newSGLangMetrics(p Profile) *metrics {
	m := unregistered()
	tok := family{m.reg, []string{"model_name"}, []string{p.Model}}
	sched := family{m.reg,
		[]string{"engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"},
		[]string{"unified", p.Model, "0", "0", "0"}}

	m.promptTokensDone = tok.counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.")
	m.generationTokensDone = tok.counter("sglang:generation_tokens_total", "Number of generation tokens processed.")
	m.cachedTokensDone = tok.counter("sglang:cached_tokens_total", "Number of cached prompt tokens.")
	done := tok.counter("sglang:num_requests_total", "Number of requests processed.")
	m.success[finishStop], m.success[finishLength] = done, done
	m.success[finishAbort] = tok.counter("sglang:num_aborted_requests_total", "Number of requests aborted.")
	m.ttft = tok.histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", sglangTTFTBuckets)
	m.itl = tok.histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", sglangITLBuckets)
	m.e2e = tok.histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", sglangE2EBuckets)
	m.retractions = tok.histogram("sglang:num_retractions", "Histogram of retraction counts per request.", sglangRetractionBuckets)

	m.running = sched.gauge("sglang:num_running_reqs", "The number of running requests.")
	m.waiting = sched.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
	m.kvUsage = sched.gauge("sglang:token_usage", "The token usage.")
	m.usedTokens = sched.gauge("sglang:num_used_tokens", "The number of used tokens.")
	m.cacheHitRate = sched.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
	sched.gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.").Set(float64(p.KVCapacityTokens))
	m.preemptions = sched.counter("sglang:num_retracted_requests_total", "Total number of retracted requests.")
	m.queueAtAdmit = sched.histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", sglangQueueBuckets)
	return m
}

// serve serves the registry's page, leaving out the families named in hide:
// from the simulator's own series when the registry holds only them and
// the request asks for the classic text, as promhttp would write it
// (TestTextPageMatchesPromhttp), or through promhttp.
func (m *metrics) serve(w http.ResponseWriter, r *http.Request, hide map[string]bool) {
	if format, ok := m.page.plainText(r); ok {
		if fams, own := m.reg.own(); own {
			m.page.seriesPage(w, format, fams, hide)
			return
		}
	}
	if len(hide) == 0 {
		m.page.serve(w, r, m.reg)
		return
	}
	m.page.serve(w, r, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams, err := m.reg.Gather()
		out := fams[:0]
		for _, f := range fams {
			if !hide[f.GetName()] {
				out = append(out, f)
			}
		}
		return out, err
	}))
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
