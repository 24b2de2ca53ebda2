package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// maxBodyBytes bounds a request body; agent prompts run to a few MB.
const maxBodyBytes = 64 << 20

// routes builds the HTTP surface: the OpenAI-compatible API as vLLM serves
// it, plus /health, /tokenize and /metrics.
func (s *Sim) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/faults", s.admin)
	mux.HandleFunc("POST /admin/faults", s.admin)
	mux.Handle("POST /v1/chat/completions", s.instrument("/v1/chat/completions", s.chat))
	mux.Handle("GET /v1/models", s.instrument("/v1/models", s.models))
	mux.Handle("POST /tokenize", s.instrument("/tokenize", s.tokenize))
	// vLLM's instrumentator leaves /health and /metrics out of http_requests_total.
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /metrics", s.metricsPage)
	mux.Handle("/", s.instrument("none", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s %s is not served here; see /v1/chat/completions, /v1/models, /tokenize, /health and /metrics", r.Method, r.URL.Path))
	}))
	return s.whileDown(mux)
}

// whileDown drops connections while a crash fault holds the engine down (for
// a mounted Handler; Start closes its listener instead).
func (s *Sim) whileDown(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() && r.URL.Path != "/admin/faults" {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			writeError(w, http.StatusServiceUnavailable, "the simulated engine crashed and is restarting")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// notReady answers 503 during a slow start and reports whether it did.
func (s *Sim) notReady(w http.ResponseWriter) bool {
	if !s.faults.Load().notReady(s.clock.Now()) {
		return false
	}
	writeError(w, http.StatusServiceUnavailable, "the simulated engine is still starting (slow-start fault); retry later")
	return true
}

// metricsPage serves the current engine life's registry, less the families
// a fault hides.
func (s *Sim) metricsPage(w http.ResponseWriter, r *http.Request) {
	fs := s.faults.Load()
	if fs.f.MetricsGone {
		http.NotFound(w, r)
		return
	}
	s.life.Load().met.serve(w, r, fs.missing)
}

// statusRecorder remembers the status a handler sent, for http_requests_total.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// instrument counts the handler's responses like prometheus-fastapi-instrumentator.
func (s *Sim) instrument(label string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h(rec, r)
		s.life.Load().met.http.WithLabelValues(label, r.Method, statusGroup(rec.code)).Inc()
	})
}

// apiError is vLLM's error body.
type apiError struct {
	Object  string  `json:"object"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	typ := map[int]string{
		http.StatusBadRequest:         "BadRequestError",
		http.StatusNotFound:           "NotFoundError",
		http.StatusServiceUnavailable: "ServiceUnavailableError",
		http.StatusTooManyRequests:    "RateLimitError",
		http.StatusForbidden:          "PermissionDeniedError",
	}[code]
	if typ == "" {
		typ = "InternalServerError"
	}
	writeJSON(w, code, apiError{Object: "error", Message: msg, Type: typ, Code: code})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// chatMessage keeps content raw so the prompt is scanned once, undecoded.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	Tools               []toolDef       `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// scanMessages counts and hashes the prompt of a list of messages.
func (s *Sim) scanMessages(msgs []chatMessage, sizeHint int) (*promptScan, error) {
	scan := newPromptScan(s.prof.BlockSize, sizeHint)
	for i, m := range msgs {
		scan.boundary(m.Role)
		if err := scan.addContent(m.Content); err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
	}
	scan.finish()
	return scan, nil
}

func (s *Sim) modelNotFound(w http.ResponseWriter, model string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", model))
}

func (s *Sim) chat(w http.ResponseWriter, req *http.Request) {
	if s.notReady(w) {
		return
	}
	began := s.clock.Now()
	l := s.life.Load()
	var buf []byte
	var err error
	var body chatRequest
	var scan *promptScan
	var fast bool
	var planned *routedChat // read ahead by this engine's Prepare, reply planned
	if rc := routed(req, s.prof.BlockSize); rc != nil {
		// The cluster's router read and scanned the body already.
		buf, body, scan, fast = rc.body, rc.req, rc.scan, true
		if rc.plannedBy == s {
			planned = rc
		}
	} else {
		buf, err = readBody(http.MaxBytesReader(w, req.Body, maxBodyBytes), req.ContentLength)
		body, scan, fast = s.scans.fastChat(buf, s.prof.BlockSize)
	}
	if err == nil && !fast {
		err = json.NewDecoder(bytes.NewReader(buf)).Decode(&body)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid chat completion request body: "+err.Error())
		return
	}
	if body.Model != l.prof.Model {
		s.modelNotFound(w, body.Model)
		return
	}
	if len(body.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "messages must hold at least one message")
		return
	}
	if !fast {
		if scan, err = s.scanMessages(body.Messages, len(buf)); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	prompt := scan.words
	if prompt == 0 {
		writeError(w, http.StatusBadRequest, "The prompt is empty: the messages hold no words.")
		return
	}
	limit := l.prof.MaxModelLen
	if fs := s.faults.Load(); fs.refuse(s.seed, s.chats.Add(1)) {
		s.refuse(w, fs.f.Refuse.Status, limit, prompt)
		return
	}
	requested := body.MaxCompletionTokens
	if requested == nil {
		requested = body.MaxTokens
	}
	var maxTokens int
	switch {
	case requested == nil && prompt >= limit:
		writeError(w, http.StatusBadRequest, fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens in the messages, Please reduce the length of the messages.",
			limit, prompt))
		return
	case requested == nil:
		maxTokens = limit - prompt
	case *requested < 1:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("max_tokens must be at least 1, got %d.", *requested))
		return
	case prompt+*requested > limit:
		writeError(w, http.StatusBadRequest, fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			limit, prompt+*requested, prompt, *requested))
		return
	default:
		maxTokens = *requested
	}

	var rep *reply
	if planned != nil {
		rep, err = planned.rep, planned.repErr
	} else {
		rep, err = s.planReply(&body, s.replySeed(scan))
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	r := &request{
		id:        s.nextID.Add(1),
		prompt:    prompt,
		maxTokens: maxTokens,
		maxParam:  maxTokens,
		finish:    finishLength,
		reply:     rep,
		hashes:    scan.hashes,
		notify:    s.clock.NewSignal(),
		quiet:     !body.Stream, // a plain answer is written whole at the end
	}
	if scan.prev != nil {
		r.seed = scan.prev.req.Load()
	}
	if scan.entry != nil {
		scan.entry.req.Store(r)
	}
	if n := rep.tokens(); n > 0 && n <= maxTokens {
		r.maxTokens, r.finish = n, rep.finish()
	} else if n := l.prof.answerTokens(maxTokens, unitOf(mix64(s.replySeed(scan)^answerSalt))); rep.tokens() == 0 && n < maxTokens {
		r.maxTokens, r.finish = n, finishStop // Terms.AnswerFractions
	}
	if s.beforeSubmit != nil {
		if err := s.beforeSubmit(req.Context(), r); err != nil {
			if req.Context().Err() == nil {
				writeError(w, http.StatusServiceUnavailable, "the prefill engine could not serve the request: "+err.Error())
			}
			return
		}
	}
	if err := s.submit(l, r); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error()+"; start it with Start or Run")
		return
	}
	resp := s.newResponse(l, r)
	if body.Stream {
		s.stream(req.Context(), w, r, resp, body.StreamOptions != nil && body.StreamOptions.IncludeUsage, began)
		return
	}
	s.complete(req.Context(), w, r, resp)
}

// replySeed is the seed of the reply to a prompt scanned as scan.
func (s *Sim) replySeed(scan *promptScan) uint64 { return mix64(s.seed ^ scan.digest()) }

// refuse answers a chat request the refusal fault turned away.
func (s *Sim) refuse(w http.ResponseWriter, status, limit, prompt int) {
	switch status {
	case http.StatusBadRequest:
		writeError(w, status, fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens in the messages, Please reduce the length of the messages.",
			limit, max(prompt, limit+1)))
	case http.StatusTooManyRequests:
		writeError(w, status, "Too many requests: the server is at its request limit; retry after a pause")
	default:
		writeError(w, status, "The server is overloaded and cannot take the request now; retry later")
	}
}

// response holds what every chunk of one answer repeats.
type response struct {
	model   string
	id      string
	created int64
	head    []byte // `data: {...,"choices":[{"index":0,"delta":{`
}

func (s *Sim) newResponse(l *life, r *request) *response {
	id := fmt.Sprintf("chatcmpl-%016x%016x", mix64(s.seed^r.id), mix64(r.id+0x5bd1e995))
	created := s.clock.Time().Unix()
	model, _ := json.Marshal(l.prof.Model)
	head := fmt.Appendf(nil, `data: {"id":%q,"object":"chat.completion.chunk","created":%d,"model":%s,"choices":[{"index":0,"delta":{`, id, created, model)
	return &response{model: l.prof.Model, id: id, created: created, head: head}
}

// word is the i-th generated token: a short deterministic word and a space.
func (s *Sim) word(i int) string {
	return s.words[mix64(uint64(i)^s.seed)%uint64(len(s.words))]
}

func answerWords(seed uint64) []string {
	base := []string{"so", "we", "read", "the", "file", "then", "run", "tests", "and", "fix", "it", "now", "ok", "next", "call", "tool"}
	out := make([]string, len(base))
	for i := range base {
		out[i] = base[(uint64(i)+seed)%uint64(len(base))] + " "
	}
	return out
}

// waitTokens blocks until r has produced more than have tokens (returning the
// new count), or the client leaves (the request is aborted), or the engine stops.
func (s *Sim) waitTokens(ctx context.Context, r *request, have int) (int, error) {
	for {
		if n := int(r.produced.Load()); n > have {
			return n, nil
		}
		i, err := s.clock.WaitFor(ctx, "sim answer tokens", -1, r.notify, r.life.stopped)
		if err != nil {
			s.abort(r)
			return have, err
		}
		if i == 1 && int(r.produced.Load()) <= have {
			return have, errEngineDown
		}
	}
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	TotalTokens         int `json:"total_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (r *request) usage() usage {
	u := usage{PromptTokens: r.prompt, CompletionTokens: int(r.produced.Load())}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = int(r.cached.Load())
	return u
}

// appendDelta appends the delta of token i of r's answer (the JSON members
// inside "delta":{...}).
func (s *Sim) appendDelta(buf []byte, r *request, i int) []byte {
	switch rep := r.reply; rep.kind {
	case replyText:
		buf = append(buf, `"content":`...)
		return appendJSONString(buf, rep.text[i])
	case replyTool:
		if i == 0 {
			buf = append(buf, `"tool_calls":[{"index":0,"id":`...)
			buf = appendJSONString(buf, rep.callID)
			buf = append(buf, `,"type":"function","function":{"name":`...)
			buf = appendJSONString(buf, rep.tool)
			return append(buf, `,"arguments":""}}]`...)
		}
		buf = append(buf, `"tool_calls":[{"index":0,"function":{"arguments":`...)
		buf = appendJSONString(buf, rep.fragment(i, r.malformed))
		return append(buf, `}}]`...)
	}
	buf = append(buf, `"content":"`...)
	buf = append(buf, s.word(i)...)
	return append(buf, '"')
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(buf, b...)
}

// completionCall is a tool call in a non-streamed answer.
type completionCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// complete waits for the whole answer and writes one chat.completion.
func (s *Sim) complete(ctx context.Context, w http.ResponseWriter, r *request, resp *response) {
	have := 0
	for have < r.maxTokens {
		n, err := s.waitTokens(ctx, r, have)
		if err != nil {
			if errors.Is(err, errEngineDown) {
				writeError(w, http.StatusServiceUnavailable, "the simulated engine stopped before the answer was complete")
			}
			return
		}
		have = n
	}
	type message struct {
		Role      string           `json:"role"`
		Content   *string          `json:"content"`
		ToolCalls []completionCall `json:"tool_calls"`
	}
	msg := message{Role: "assistant", ToolCalls: []completionCall{}}
	switch rep := r.reply; rep.kind {
	case replyTool:
		c := completionCall{ID: rep.callID, Type: "function"}
		c.Function.Name = rep.tool
		var args strings.Builder
		for i := 1; i < r.maxTokens; i++ {
			args.WriteString(rep.fragment(i, r.malformed))
		}
		c.Function.Arguments = args.String()
		msg.ToolCalls = append(msg.ToolCalls, c)
	default:
		text := make([]byte, 0, r.maxTokens*6)
		for i := range r.maxTokens {
			if rep.kind == replyText {
				text = append(text, rep.text[i]...)
			} else {
				text = append(text, s.word(i)...)
			}
		}
		content := string(text)
		msg.Content = &content
	}
	type choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		Logprobs     any     `json:"logprobs"`
		FinishReason string  `json:"finish_reason"`
		StopReason   any     `json:"stop_reason"`
	}
	writeJSON(w, http.StatusOK, struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   usage    `json:"usage"`
	}{
		ID: resp.id, Object: "chat.completion", Created: resp.created, Model: resp.model,
		Choices: []choice{{Message: msg, FinishReason: r.finish}},
		Usage:   r.usage(),
	})
}
