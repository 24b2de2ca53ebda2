package load

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/prompt"
)

func TestTokenizerCount(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    int
		noTok   bool   // the error must wrap prompt.ErrNoTokenizer
		err     string // a part of the error, "" for none
	}{
		// vLLM answers count, max_model_len and the tokens.
		{"vllm", func(w http.ResponseWriter, r *http.Request) {
			var req struct{ Model, Prompt string }
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "m" || r.URL.Path != "/tokenize" {
				http.Error(w, "bad request", 400)
				return
			}
			n := len(strings.Fields(req.Prompt)) * 2
			json.NewEncoder(w).Encode(map[string]any{"count": n, "max_model_len": 8192, "tokens": make([]int, n)})
		}, 6, false, ""},
		// An answer with tokens only is counted by them.
		{"tokens only", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"tokens":[1,2,3,4]}`)) }, 4, false, ""},
		// No endpoint: the caller falls back to the estimate.
		{"404", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, 0, true, "HTTP 404"},
		// A server error is an error, not a fallback.
		{"500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, 0, false, "HTTP 500: boom"},
		// Nonsense answers are named.
		{"not json", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`<html>`)) }, 0, false, "not JSON"},
		{"no count", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) }, 0, false, "neither count nor tokens"},
	}
	for _, c := range cases {
		srv := httptest.NewServer(c.handler)
		n, err := NewTokenizer(srv.URL, "m").Count(context.Background(), []byte("one two three"))
		srv.Close()
		if c.err == "" && (err != nil || n != c.want) {
			t.Errorf("%s: count %d, err %v; want %d", c.name, n, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.err)
		}
		if got := errors.Is(err, prompt.ErrNoTokenizer); got != c.noTok {
			t.Errorf("%s: wraps ErrNoTokenizer %v, want %v", c.name, got, c.noTok)
		}
	}
}

func TestCalibrateAgainstTokenizeEndpoint(t *testing.T) {
	// A server whose tokenizer makes 3 tokens of every word, plus a BOS.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Prompt string }
		json.NewDecoder(r.Body).Decode(&req)
		json.NewEncoder(w).Encode(map[string]int{"count": 1 + 3*len(strings.Fields(req.Prompt))})
	}))
	defer srv.Close()
	cal, err := prompt.Calibrate(prompt.Builder{Seed: 1}, NewTokenizer(srv.URL, "m").Func(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	if cal.Estimated || cal.TokensPerWord != 3 {
		t.Errorf("calibration %+v, want a measured 3 tokens per word", cal)
	}
}
