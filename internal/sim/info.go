package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// The endpoints besides chat: /v1/models, /health and /tokenize.

func (s *Sim) models(w http.ResponseWriter, _ *http.Request) {
	if s.notReady(w) {
		return
	}
	prof := s.life.Load().prof
	type permission struct {
		ID                 string  `json:"id"`
		Object             string  `json:"object"`
		Created            int64   `json:"created"`
		AllowCreateEngine  bool    `json:"allow_create_engine"`
		AllowSampling      bool    `json:"allow_sampling"`
		AllowLogprobs      bool    `json:"allow_logprobs"`
		AllowSearchIndices bool    `json:"allow_search_indices"`
		AllowView          bool    `json:"allow_view"`
		AllowFineTuning    bool    `json:"allow_fine_tuning"`
		Organization       string  `json:"organization"`
		Group              *string `json:"group"`
		IsBlocking         bool    `json:"is_blocking"`
	}
	type card struct {
		ID          string       `json:"id"`
		Object      string       `json:"object"`
		Created     int64        `json:"created"`
		OwnedBy     string       `json:"owned_by"`
		Root        string       `json:"root"`
		Parent      *string      `json:"parent"`
		MaxModelLen int          `json:"max_model_len"`
		Permission  []permission `json:"permission"`
	}
	now := s.clock.Time().Unix()
	writeJSON(w, http.StatusOK, struct {
		Object string `json:"object"`
		Data   []card `json:"data"`
	}{"list", []card{{
		ID: prof.Model, Object: "model", Created: now, OwnedBy: s.pers.ownedBy, Root: prof.Model,
		MaxModelLen: prof.MaxModelLen,
		Permission: []permission{{
			ID: "modelperm-" + strconv.FormatUint(mix64(s.seed+1), 16), Object: "model_permission", Created: now,
			AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*",
		}},
	}}})
}

func (s *Sim) health(w http.ResponseWriter, _ *http.Request) {
	if !s.life.Load().up.Load() || s.faults.Load().notReady(s.clock.Now()) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// tokenize counts tokens like vLLM's /tokenize. Token ids are not modelled:
// "tokens" is always an empty list; "count" is the word count.
func (s *Sim) tokenize(w http.ResponseWriter, req *http.Request) {
	if s.notReady(w) {
		return
	}
	prof := s.life.Load().prof
	var body struct {
		Model    string          `json:"model"`
		Prompt   json.RawMessage `json:"prompt"`
		Messages []chatMessage   `json:"messages"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxBodyBytes)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid tokenize request body: "+err.Error())
		return
	}
	if body.Model != "" && body.Model != prof.Model {
		s.modelNotFound(w, body.Model)
		return
	}
	var scan *promptScan
	var err error
	switch {
	case len(body.Messages) > 0:
		scan, err = s.scanMessages(body.Messages, int(req.ContentLength))
	case len(body.Prompt) > 0:
		scan = newPromptScan(s.prof.BlockSize, int(req.ContentLength))
		if err = scan.addJSONString(trimJSONSpace(body.Prompt)); err != nil {
			err = fmt.Errorf("prompt: %w", err)
		}
		scan.finish()
	default:
		err = errors.New("give either prompt (a string) or messages")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Count       int    `json:"count"`
		MaxModelLen int    `json:"max_model_len"`
		Tokens      []int  `json:"tokens"`
		TokenStrs   *[]any `json:"token_strs"`
	}{scan.words, prof.MaxModelLen, []int{}, nil})
}
