package rig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/transport"
	"sigs.k8s.io/yaml"
)

// barSignals are the signals the bar needs; the alternatives in a group
// stand in for each other (without a per-request time per output token,
// interactivity is derived per request from inter-token latency).
func barSignals(clientErrors bool) [][]string {
	out := [][]string{{signal.TTFT}, {signal.TPOT, signal.ITL}, {signal.RequestsAborted, signal.RequestsFailed}}
	if !clientErrors {
		out = append(out, []string{signal.HTTP4xx}, []string{signal.HTTP5xx})
	}
	return out
}

// preflight checks, before any load: the endpoint answers, lists the model,
// the right recipe is live where the server says so, every signal the bar
// needs is reported, and the engine is idle.
//
// A server that reports no HTTP status counters at all has its errors
// counted as the client sees them: preflight turns cfg.Bar.ClientErrors
// on and says so.
func preflight(ctx context.Context, cfg *config.Run, endpoint string, acc access, src *metricsSource, clock *timescale.Clock) (string, error) {
	hc := acc.endpoint.Client(probeTimeout)
	models, err := listModels(ctx, hc, endpoint)
	if err != nil {
		return "", fmt.Errorf("the endpoint does not answer: %w (is it up? is recipe.endpoint right?)", err)
	}
	maxLen, found := models.card(cfg.Recipe.Model)
	if !found {
		return "", fmt.Errorf("the endpoint does not serve model %q (it lists: %s): the wrong recipe is live, or fix recipe.model", cfg.Recipe.Model, strings.Join(models.ids(), ", "))
	}
	var notes []string
	if want := cfg.Recipe.MaxModelLen; want > 0 {
		switch {
		case maxLen == 0:
			notes = append(notes, "the server does not report max_model_len in /v1/models, so recipe.max_model_len was not checked against it there")
		case maxLen != want:
			return "", fmt.Errorf("the live recipe serves a context of %d tokens, the recipe says %d: the wrong recipe is live", maxLen, want)
		}
	}
	if want := cfg.Recipe.EngineVersion; want != "" {
		var v struct {
			Version string `json:"version"`
		}
		switch err := getJSON(ctx, hc, endpoint+"/version", &v); {
		case err != nil:
			notes = append(notes, "the server does not report its version; the engine version was not checked")
		case v.Version != want:
			return "", fmt.Errorf("the live engine is version %q, the recipe says %q: the wrong recipe is live", v.Version, want)
		}
	}
	// One read of each target serves the engine check and the coverage
	// check; a target that does not answer is reported by the scrape below.
	fams, famErr := src.families(ctx, clock.Now())
	if eng := src.engine(ctx, fams, clock.Now()); famErr == nil && eng != "" && cfg.Recipe.Engine != "" && !strings.EqualFold(eng, cfg.Recipe.Engine) {
		return "", fmt.Errorf("the server's metrics are %s's (%s:*), the recipe says engine %q: the wrong recipe is live", eng, eng, cfg.Recipe.Engine)
	}
	s, err := src.Scrape(ctx, clock.Now())
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	if len(s.Errors) > 0 {
		return "", fmt.Errorf("metrics: some targets did not answer: %s", strings.Join(s.Errors, "; "))
	}
	// Nothing read twice; each fixed URL answers from one process.
	srcNotes, err := src.check(ctx, clock.Now())
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	notes = append(notes, srcNotes...)
	missing := missingSignals(s, cfg.Bar.ClientErrors)
	if len(missing) > 0 {
		// Some engines (llm-d-inference-sim) show their latency
		// histograms only once they have answered a request: send one,
		// and look again before refusing a signal.
		if perr := prime(ctx, hc, endpoint, cfg.Recipe.Model); perr != nil {
			notes = append(notes, fmt.Sprintf("a priming request failed (%v)", perr))
		} else {
			notes = append(notes, fmt.Sprintf("one priming request was sent, since the first scrape lacked %s", strings.Join(missing, ", ")))
		}
		// a server may count the request a moment after its answer ends
		// (llm-d-inference-sim does): look a few times, half a second apart
		for try := 0; ; try++ {
			if s, err = src.Scrape(ctx, clock.Now()); err != nil {
				return "", fmt.Errorf("metrics: %w", err)
			}
			missing = missingSignals(s, cfg.Bar.ClientErrors)
			if try == primeLooks-1 || !slices.ContainsFunc(missing, func(m string) bool { return !strings.HasPrefix(m, "http_") }) {
				break
			}
			if err := clock.Sleep(ctx, primeLookEvery); err != nil {
				return "", err
			}
		}
		fams, famErr = src.families(ctx, clock.Now())
	}
	if !cfg.Bar.ClientErrors && len(missing) > 0 && !slices.ContainsFunc(missing, func(m string) bool { return !strings.HasPrefix(m, "http_") }) {
		// The server counts no HTTP statuses at all (SGLang,
		// llm-d-inference-sim): errors are counted as the client sees
		// them, said here and in the report's warnings.
		cfg.Bar.ClientErrors = true
		notes = append(notes, clientErrorsNote(missing))
		missing = nil
	}
	if len(missing) > 0 {
		hint := "check recipe.metrics and recipe.mapping"
		return "", fmt.Errorf("the bar needs signals the server does not report: %s (%s)", strings.Join(missing, ", "), hint)
	}
	if famErr != nil {
		notes = append(notes, fmt.Sprintf("the rules' label matchers and the bar's buckets were not checked (%v)", famErr))
	} else {
		more, err := checkSignals(src.mapping, fams, *cfg)
		if err != nil {
			return "", err
		}
		notes = append(notes, more...)
	}
	running, okR := s.Gauge[signal.Running]
	waiting, okW := s.Gauge[signal.Waiting]
	switch {
	case !okR || !okW:
		notes = append(notes, "the server reports no running/waiting gauges; idleness was not checked")
	case running+waiting > 0:
		return "", fmt.Errorf("the engine is not idle (%g running, %g waiting): someone else is using it, or a previous run left work behind", running, waiting)
	}
	detail := fmt.Sprintf("%s serves %s", transport.URL(endpoint), cfg.Recipe.Model)
	if maxLen > 0 {
		detail += fmt.Sprintf(" with a %d-token context", maxLen)
	}
	detail += "; every signal the bar needs is reported; the engine is idle"
	for _, n := range notes {
		detail += "; " + n
	}
	return detail, nil
}

// adoptClientErrors records that pre-flight turned bar.client_errors on:
// config.yaml says so, so that `headroom judge` judges as the run did, and
// the report's warnings say it once.
func (r *run) adoptClientErrors(cfg config.Run) error {
	r.cfg.Bar.ClientErrors = true
	r.notes = append(r.notes, "errors are the client's count: the server reports no HTTP status counters (http_4xx, http_5xx), so pre-flight turned bar.client_errors on")
	resolved, err := yaml.Marshal(cfg.Redacted())
	if err != nil {
		return err
	}
	return r.dir.WriteFile("config.yaml", resolved)
}

// After a priming request pre-flight looks again up to primeLooks times,
// primeLookEvery apart, before it refuses a signal.
const (
	primeLooks     = 10
	primeLookEvery = 500 * time.Millisecond
)

// missingSignals are the groups of bar signals s holds none of.
func missingSignals(s signal.Sample, clientErrors bool) []string {
	var missing []string
	for _, group := range barSignals(clientErrors) {
		ok := false
		for _, name := range group {
			if _, h := s.Hist[name]; h {
				ok = true
			}
			if _, c := s.Counter[name]; c {
				ok = true
			}
		}
		if !ok {
			missing = append(missing, strings.Join(group, " or "))
		}
	}
	return missing
}

// clientErrorsNote says, once, that errors are the client's count.
func clientErrorsNote(missing []string) string {
	return fmt.Sprintf("the server reports no HTTP status counters (%s): refusals and server errors are counted as the client sees them (bar.client_errors); put a gateway's /metrics in recipe.metrics to judge them on the server's count", strings.Join(missing, ", "))
}

// prime sends one small streamed chat completion and reads it to the end,
// so that an engine which shows its latency histograms only after its first
// answer shows them.
func prime(ctx context.Context, hc *http.Client, endpoint, model string) error {
	body, err := json.Marshal(map[string]any{
		"model": model, "max_tokens": 2, "stream": true,
		"messages": []map[string]string{{"role": "user", "content": "ping"}},
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/v1/chat/completions answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// modelList is /v1/models as headroom reads it: each model's id and, where
// the server says (vLLM, recent SGLang), its context length.
type modelList struct {
	Data []struct {
		ID          string `json:"id"`
		MaxModelLen int    `json:"max_model_len"`
	} `json:"data"`
}

// listModels reads endpoint's /v1/models.
func listModels(ctx context.Context, hc *http.Client, endpoint string) (modelList, error) {
	var l modelList
	err := getJSON(ctx, hc, endpoint+"/v1/models", &l)
	return l, err
}

// card says whether the list serves model, and its max_model_len (0 when
// the server does not say).
func (l modelList) card(model string) (maxLen int, found bool) {
	for _, m := range l.Data {
		if m.ID == model {
			return m.MaxModelLen, true
		}
	}
	return 0, false
}

// ids are the models the list serves, in its order.
func (l modelList) ids() []string {
	out := make([]string, 0, len(l.Data))
	for _, m := range l.Data {
		out = append(out, m.ID)
	}
	return out
}

func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}
