package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

func TestStreamingFormat(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 200)
	res := streamChat(t, url, "tiny-model", words("a", 0, 30), 12)

	if !res.done {
		t.Fatal("stream did not end with data: [DONE]")
	}
	// Chunks: a role chunk, 12 content chunks, a usage chunk.
	if len(res.chunks) != 14 {
		t.Fatalf("got %d chunks, want 14 (role, 12 tokens, usage)", len(res.chunks))
	}
	for i, c := range res.chunks {
		if c["object"] != "chat.completion.chunk" || c["model"] != "tiny-model" || !strings.HasPrefix(c["id"].(string), "chatcmpl-") {
			t.Errorf("chunk %d has wrong envelope: %v", i, c)
		}
	}
	first := res.chunks[0]["choices"].([]any)[0].(map[string]any)
	if first["delta"].(map[string]any)["role"] != "assistant" {
		t.Errorf("first chunk does not carry the assistant role: %v", first)
	}
	for i := 1; i <= 12; i++ {
		ch := res.chunks[i]["choices"].([]any)[0].(map[string]any)
		content := ch["delta"].(map[string]any)["content"].(string)
		if len(strings.Fields(content)) != 1 || !strings.HasSuffix(content, " ") {
			t.Errorf("token chunk %d content %q is not one word and a space", i, content)
		}
		want := any(nil)
		if i == 12 {
			want = "length"
		}
		if ch["finish_reason"] != want {
			t.Errorf("token chunk %d finish_reason = %v, want %v", i, ch["finish_reason"], want)
		}
	}
	last := res.chunks[13]
	if len(last["choices"].([]any)) != 0 {
		t.Errorf("usage chunk has choices: %v", last)
	}
	u := res.usage
	if u["prompt_tokens"] != 30.0 || u["completion_tokens"] != 12.0 || u["total_tokens"] != 42.0 {
		t.Errorf("usage = %v, want 30 prompt, 12 completion, 42 total", u)
	}
	if _, ok := u["prompt_tokens_details"].(map[string]any)["cached_tokens"]; !ok {
		t.Errorf("usage lacks prompt_tokens_details.cached_tokens: %v", u)
	}
	if got := len(strings.Fields(res.content)); got != 12 {
		t.Errorf("content has %d words, want 12", got)
	}
}

func TestNonStreaming(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 200)
	resp := post(t, context.Background(), url+"/v1/chat/completions", chatJSON("tiny-model", words("b", 0, 20), 9, false))
	defer resp.Body.Close()
	var got struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || got.Object != "chat.completion" || len(got.Choices) != 1 {
		t.Fatalf("status %d, body %+v", resp.StatusCode, got)
	}
	c := got.Choices[0]
	if c.Message.Role != "assistant" || c.FinishReason != "length" || len(strings.Fields(c.Message.Content)) != 9 {
		t.Errorf("choice = %+v, want an assistant answer of 9 words ending for length", c)
	}
	if got.Usage.PromptTokens != 20 || got.Usage.CompletionTokens != 9 || got.Usage.TotalTokens != 29 {
		t.Errorf("usage = %+v", got.Usage)
	}
}

func TestErrors(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 200)
	tests := []struct {
		name string
		body []byte
		code int
		want string // the whole JSON body
	}{
		// prompt 2000 + 100 > 2048: vLLM's context-length refusal.
		{"over length", chatJSON("tiny-model", words("c", 0, 2000), 100, true), 400,
			`{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 2100 tokens (2000 in the messages, 100 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`},
		// A prompt that fills the context with no max_tokens leaves nothing to generate.
		{"prompt fills context", chatJSON("tiny-model", words("c", 0, 2048), 0, false), 400,
			`{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 2048 tokens in the messages, Please reduce the length of the messages.","type":"BadRequestError","param":null,"code":400}`},
		// Another model id: vLLM's 404.
		{"wrong model", chatJSON("gpt-4", "hi", 5, false), 404,
			`{"object":"error","message":"The model ` + "`gpt-4`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, context.Background(), url+"/v1/chat/completions", tc.body)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.code)
			}
			if string(b) != tc.want {
				t.Errorf("body = %s\nwant   %s", b, tc.want)
			}
		})
	}
	fams := scrape(t, url)
	if got := value(t, fams, "http_requests_total", "handler", "/v1/chat/completions", "method", "POST", "status", "4xx"); got != 3 {
		t.Errorf("http_requests_total 4xx = %g, want 3", got)
	}
}

func TestMissingMaxTokensFillsContext(t *testing.T) {
	p := tinyProfile()
	p.MaxModelLen = 64
	_, url := startSim(t, p, 1000)
	res := streamChat(t, url, "tiny-model", words("m", 0, 60), 0)
	if got := res.usage["completion_tokens"]; got != 4.0 {
		t.Errorf("completion_tokens = %v, want 64-60 = 4", got)
	}
}

func TestMetricsExposition(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 500)
	streamChat(t, url, "tiny-model", words("d", 0, 10), 3)
	fams := scrape(t, url)

	want := map[string]dto.MetricType{
		"vllm:time_to_first_token_seconds":           dto.MetricType_HISTOGRAM,
		"vllm:inter_token_latency_seconds":           dto.MetricType_HISTOGRAM,
		"vllm:request_time_per_output_token_seconds": dto.MetricType_HISTOGRAM,
		"vllm:e2e_request_latency_seconds":           dto.MetricType_HISTOGRAM,
		"vllm:request_queue_time_seconds":            dto.MetricType_HISTOGRAM,
		"vllm:request_inference_time_seconds":        dto.MetricType_HISTOGRAM,
		"vllm:request_prefill_time_seconds":          dto.MetricType_HISTOGRAM,
		"vllm:request_decode_time_seconds":           dto.MetricType_HISTOGRAM,
		"vllm:request_prompt_tokens":                 dto.MetricType_HISTOGRAM,
		"vllm:request_generation_tokens":             dto.MetricType_HISTOGRAM,
		"vllm:request_params_max_tokens":             dto.MetricType_HISTOGRAM,
		"vllm:iteration_tokens_total":                dto.MetricType_HISTOGRAM,
		"vllm:request_success_total":                 dto.MetricType_COUNTER,
		"vllm:num_requests_running":                  dto.MetricType_GAUGE,
		"vllm:num_requests_waiting":                  dto.MetricType_GAUGE,
		"vllm:kv_cache_usage_perc":                   dto.MetricType_GAUGE,
		"vllm:prefix_cache_queries_total":            dto.MetricType_COUNTER,
		"vllm:prefix_cache_hits_total":               dto.MetricType_COUNTER,
		"vllm:prompt_tokens_total":                   dto.MetricType_COUNTER,
		"vllm:prompt_tokens_cached_total":            dto.MetricType_COUNTER,
		"vllm:prompt_tokens_by_source_total":         dto.MetricType_COUNTER,
		"vllm:generation_tokens_total":               dto.MetricType_COUNTER,
		"vllm:num_preemptions_total":                 dto.MetricType_COUNTER,
		"vllm:cache_config_info":                     dto.MetricType_GAUGE,
		"http_requests_total":                        dto.MetricType_COUNTER,
		"headroom_sim_lag_seconds":                   dto.MetricType_GAUGE,
	}
	for name, typ := range want {
		f, ok := fams[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is %v, want %v", name, f.GetType(), typ)
		}
		if strings.HasPrefix(name, "vllm:") && name != "vllm:cache_config_info" {
			for _, m := range f.GetMetric() {
				if !hasLabels(m, "model_name", "tiny-model", "engine", "0") {
					t.Errorf("%s sample lacks model_name/engine labels: %v", name, m.GetLabel())
				}
			}
		}
	}

	buckets := map[string][]float64{
		"vllm:time_to_first_token_seconds":           ttftBuckets,
		"vllm:inter_token_latency_seconds":           {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80},
		"vllm:request_time_per_output_token_seconds": {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80},
		"vllm:e2e_request_latency_seconds":           {0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680},
		"vllm:request_prompt_tokens":                 {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000},
	}
	for name, want := range buckets {
		var got []float64
		for _, b := range fams[name].GetMetric()[0].GetHistogram().GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				got = append(got, b.GetUpperBound())
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s buckets = %v, want %v", name, got, want)
		}
	}
	for _, reason := range []string{"stop", "length", "abort"} {
		value(t, fams, "vllm:request_success_total", "finished_reason", reason)
	}
	if got := value(t, fams, "vllm:request_success_total", "finished_reason", "length"); got != 1 {
		t.Errorf("request_success_total{length} = %g, want 1", got)
	}
	if got := value(t, fams, "vllm:cache_config_info", "block_size", "4", "num_gpu_blocks", "4096", "engine", "0"); got != 1 {
		t.Errorf("cache_config_info = %g, want 1", got)
	}
}

func TestPrefixCacheCutsTTFT(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 200)
	base := words("p", 0, 600)

	first := streamChat(t, url, "tiny-model", base, 2)
	f1 := scrape(t, url)
	sum1, _ := hist(t, f1, "vllm:time_to_first_token_seconds")

	second := streamChat(t, url, "tiny-model", base+" "+words("q", 0, 8), 2)
	f2 := scrape(t, url)
	sum2, _ := hist(t, f2, "vllm:time_to_first_token_seconds")

	if got := first.usage["prompt_tokens_details"].(map[string]any)["cached_tokens"]; got != 0.0 {
		t.Errorf("first request cached_tokens = %v, want 0", got)
	}
	// 600 words are 150 full blocks of 4, all cached by the first request.
	if got := second.usage["prompt_tokens_details"].(map[string]any)["cached_tokens"]; got != 600.0 {
		t.Errorf("second request cached_tokens = %v, want 600", got)
	}
	ttft1, ttft2 := sum1, sum2-sum1
	if !(ttft2 < ttft1/5) {
		t.Errorf("TTFT with a cached prefix %.4fs is not well below the uncached %.4fs", ttft2, ttft1)
	}
	if q, h := value(t, f2, "vllm:prefix_cache_queries_total"), value(t, f2, "vllm:prefix_cache_hits_total"); q != 1208 || h != 600 {
		t.Errorf("prefix cache queries/hits = %g/%g, want 1208/600 tokens", q, h)
	}
}

func TestBatchingSlowsDecode(t *testing.T) {
	// Scale 20 keeps each stream ~60 ms of wall time, so the four overlap.
	_, url := startSim(t, tinyProfile(), 20)
	// tpot returns the mean modelled time per output token of n concurrent streams.
	tpot := func(tag string, n int) float64 {
		before := scrape(t, url)
		s0, c0 := hist(t, before, "vllm:request_time_per_output_token_seconds")
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { streamChat(t, url, "tiny-model", words(tag+string(rune('a'+i)), 0, 1000), 60) })
		}
		wg.Wait()
		after := scrape(t, url)
		s1, c1 := hist(t, after, "vllm:request_time_per_output_token_seconds")
		return (s1 - s0) / float64(c1-c0)
	}
	alone := tpot("x", 1)
	together := tpot("y", 4)
	// Alone: 10 ms + 1000 x 10 us = ~20 ms a token. Four together read four
	// contexts a step: ~50 ms.
	if !(together > 1.5*alone) {
		t.Errorf("time per output token with 4 streams %.4fs is not well above 1 stream's %.4fs", together, alone)
	}
}

func TestAbortOnDisconnect(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 100)
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, ctx, url+"/v1/chat/completions", chatJSON("tiny-model", words("z", 0, 50), 1900, true))
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the first chunk arrived
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()

	fams := waitMetric(t, url, "the abort to be counted", func(f map[string]*dto.MetricFamily) bool {
		return value(t, f, "vllm:request_success_total", "finished_reason", "abort") == 1 &&
			value(t, f, "vllm:num_requests_running") == 0
	})
	if got := value(t, fams, "vllm:kv_cache_usage_perc"); got != 0 {
		t.Errorf("kv_cache_usage_perc after abort = %g, want 0 (blocks freed)", got)
	}
	if got := value(t, fams, "vllm:request_success_total", "finished_reason", "length"); got != 0 {
		t.Errorf("request_success_total{length} = %g, want 0", got)
	}
}

func TestScaledTTFTMatchesModelledCost(t *testing.T) {
	p := tinyProfile()
	p.PrefillAttentionSecondsPerKVToken = 1e-7
	_, url := startSim(t, p, 100)
	streamChat(t, url, "tiny-model", words("s", 0, 600), 5)
	fams := scrape(t, url)

	// 600 prompt tokens in chunks of 256, 256 and 88: three iterations of
	// 10 ms base, 600/10000 s of prefill and attention over
	// 256*128 + 256*(256+128) + 88*(512+44) = 180000 token-pairs.
	want := 3*0.010 + 600.0/10000 + 1e-7*180000
	sum, n := hist(t, fams, "vllm:time_to_first_token_seconds")
	if n != 1 || math.Abs(sum-want) > 1e-6 {
		t.Errorf("TTFT = %.7fs over %d requests, want %.7fs", sum, n, want)
	}
	// Four more tokens, each a decode step over 600+k tokens of context.
	wantDecode := 0.0
	for k := 1; k <= 4; k++ {
		wantDecode += 0.010 + 1e-5*float64(600+k)
	}
	if got, _ := hist(t, fams, "vllm:request_decode_time_seconds"); math.Abs(got-wantDecode) > 1e-6 {
		t.Errorf("decode time = %.7fs, want %.7fs", got, wantDecode)
	}
	if got, _ := hist(t, fams, "vllm:request_queue_time_seconds"); got != 0 {
		t.Errorf("queue time on an idle engine = %gs, want 0", got)
	}
}

func TestPreemptionWhenKVIsShort(t *testing.T) {
	p := tinyProfile()
	p.MaxModelLen = 256
	p.KVCapacityTokens = 256     // 64 blocks; four requests growing to 48 blocks each cannot all fit
	_, url := startSim(t, p, 50) // ~40 ms of wall time a stream, so they overlap
	var wg sync.WaitGroup
	results := make([]streamResult, 4)
	for i := range results {
		wg.Go(func() { results[i] = streamChat(t, url, "tiny-model", words(string(rune('k'+i)), 0, 40), 150) })
	}
	wg.Wait()
	for i, r := range results {
		if !r.done || len(strings.Fields(r.content)) != 150 {
			t.Errorf("stream %d: done=%v with %d words, want 150", i, r.done, len(strings.Fields(r.content)))
		}
	}
	fams := scrape(t, url)
	if got := value(t, fams, "vllm:num_preemptions_total"); got == 0 {
		t.Error("no preemption counted although the KV cache could not hold all four requests")
	}
	if got := value(t, fams, "vllm:request_success_total", "finished_reason", "length"); got != 4 {
		t.Errorf("request_success_total{length} = %g, want 4", got)
	}
}

func TestModelsHealthTokenize(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 100)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		code   int
		check  func(t *testing.T, body map[string]any)
	}{
		// /v1/models lists the one model with its context length.
		{"models", "GET", "/v1/models", "", 200, func(t *testing.T, b map[string]any) {
			d := b["data"].([]any)[0].(map[string]any)
			if d["id"] != "tiny-model" || d["max_model_len"] != 2048.0 || d["owned_by"] != "vllm" {
				t.Errorf("model card = %v", d)
			}
		}},
		// /health answers 200 with an empty body while serving.
		{"health", "GET", "/health", "", 200, nil},
		// /tokenize with a prompt counts its words.
		{"tokenize prompt", "POST", "/tokenize", `{"model":"tiny-model","prompt":"one two\tthree\nfour"}`, 200, func(t *testing.T, b map[string]any) {
			if b["count"] != 4.0 || b["max_model_len"] != 2048.0 {
				t.Errorf("tokenize = %v, want count 4", b)
			}
		}},
		// /tokenize with messages counts words across contents, parts included.
		{"tokenize messages", "POST", "/tokenize", `{"messages":[{"role":"system","content":"a b"},{"role":"user","content":[{"type":"text","text":"c d e"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, 200, func(t *testing.T, b map[string]any) {
			if b["count"] != 5.0 {
				t.Errorf("tokenize = %v, want count 5", b)
			}
		}},
		// An unknown path is a 404 in vLLM's error shape.
		{"unknown path", "GET", "/v2/nothing", "", 404, func(t *testing.T, b map[string]any) {
			if b["object"] != "error" {
				t.Errorf("body = %v", b)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, url+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tc.code)
			}
			if tc.check == nil {
				return
			}
			var b map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
				t.Fatal(err)
			}
			tc.check(t, b)
		})
	}
}

func TestCloseEndsOpenStreams(t *testing.T) {
	s, err := New(Options{Profile: tinyProfile(), Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// At real time, 1900 tokens take about 40 s; Close must not wait for them.
	resp := post(t, context.Background(), url+"/v1/chat/completions", chatJSON("tiny-model", words("w", 0, 10), 1900, true))
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rest, _ := io.ReadAll(br)
	if strings.Contains(string(rest), "[DONE]") {
		t.Error("a stream cut by Close claimed to be complete")
	}
	if resp2, err := http.Get(url + "/health"); err == nil {
		resp2.Body.Close()
		t.Error("server still answers after Close")
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(o *Options)
		field string // the error must name it
	}{
		{"no model", func(o *Options) { o.Profile.Model = "" }, "model"},
		{"zero block size", func(o *Options) { o.Profile.BlockSize = 0 }, "block_size"},
		{"negative prefill rate", func(o *Options) { o.Profile.PrefillTokensPerSecond = -1 }, "prefill_tokens_per_second"},
		{"KV below one context", func(o *Options) { o.Profile.KVCapacityTokens = 1000 }, "kv_capacity_tokens"},
		{"decode free", func(o *Options) { o.Profile.DecodeBaseSeconds, o.Profile.DecodeSecondsPerKVToken = 0, 0 }, "decode_base_seconds"},
		{"negative decode term", func(o *Options) { o.Profile.DecodeSecondsPerKVToken = -1 }, "decode_seconds_per_kv_token"},
		{"zero scale", func(o *Options) { o.Scale = 0 }, "scale"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Profile: tinyProfile(), Scale: 10}
			tc.edit(&o)
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("New error = %v, want one naming %s", err, tc.field)
			}
		})
	}
	if _, err := New(Options{Profile: DefaultProfile(), Scale: 60}); err != nil {
		t.Errorf("the default profile does not validate: %v", err)
	}
}

func TestHandlerWithRun(t *testing.T) {
	s, err := New(Options{Profile: tinyProfile(), Scale: 200})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	// Before Run: not healthy, and chat requests are refused with 503.
	resp := post(t, context.Background(), srv.URL+"/v1/chat/completions", chatJSON("tiny-model", "a b c", 2, false))
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("chat before Run: status %d, want 503", resp.StatusCode)
	}
	if h, err := http.Get(srv.URL + "/health"); err != nil || h.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("health before Run: %v %v, want 503", h.StatusCode, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	waitMetric(t, srv.URL, "the engine to start", func(map[string]*dto.MetricFamily) bool { return s.life.Load().up.Load() })
	res := streamChat(t, srv.URL, "tiny-model", "a b c", 4)
	if !res.done || len(strings.Fields(res.content)) != 4 {
		t.Errorf("stream through a mounted handler: done=%v content %q", res.done, res.content)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run returned %v after its context ended, want nil", err)
	}
	if err := s.Run(context.Background()); err == nil {
		t.Error("a second Run did not fail")
	}
}

// TestCloseWithAnUnusedConnection: a client that dialled a spare
// connection and sent nothing on it (Go's transport does this when another
// connection frees first) does not make Close fail. Shutdown waits 5 s for
// such a connection, past Close's 2 s, and Close used to report "context
// deadline exceeded" although no answer was cut.
func TestCloseWithAnUnusedConnection(t *testing.T) {
	s, err := New(Options{Profile: tinyProfile(), Scale: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := s.Close(); err != nil {
		t.Errorf("Close with one connection that sent no request: %v", err)
	}
}
