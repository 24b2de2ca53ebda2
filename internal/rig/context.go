package rig

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/trace"
)

// Where a context length was read, as the pre-flight detail and the report
// name it.
const (
	contextFromModels = "/v1/models max_model_len"
	contextFromProps  = "/props n_ctx"
	contextFromRecipe = "recipe.max_model_len"
	contextFromSim    = "the simulator profile's max_model_len"
)

// servedContext asks the endpoint how long a context it serves model with:
// max_model_len on the model's card in /v1/models (vLLM; SGLang's ModelCard
// in recent versions), else n_ctx under /props default_generation_settings
// (llama.cpp's server: the context of one slot, which is what one request
// gets). It returns 0 and "" when the server reports neither.
func servedContext(ctx context.Context, hc *http.Client, endpoint, model string) (int, string) {
	if models, err := listModels(ctx, hc, endpoint); err == nil {
		if n, _ := models.card(model); n > 0 {
			return n, contextFromModels
		}
	}
	var props struct {
		Settings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if err := getJSON(ctx, hc, endpoint+"/props", &props); err == nil && props.Settings.NCtx > 0 {
		return props.Settings.NCtx, contextFromProps
	}
	return 0, ""
}

// contextLength is the context the run's turns are checked against: what the
// server reports, else recipe.max_model_len; 0 when neither says. A served
// length other than the recipe's is the wrong recipe live (pre-flight says so
// for /v1/models; this says it for /props).
func contextLength(ctx context.Context, cfg config.Run, endpoint string, acc access) (int, string, error) {
	n, src := servedContext(ctx, acc.endpoint.Client(probeTimeout), endpoint, cfg.Recipe.Model)
	want := cfg.Recipe.MaxModelLen
	switch {
	case n > 0 && want > 0 && n != want:
		return 0, "", fmt.Errorf("the live recipe serves a context of %d tokens (%s), the recipe says %d: the wrong recipe is live, or fix recipe.max_model_len", n, src, want)
	case n > 0:
		return n, src, nil
	case want > 0:
		return want, contextFromRecipe, nil
	}
	return 0, "", nil
}

// replayedTiers are the tiers of sessions the mix sends lanes to, heavy and
// light first and any others after by name; a tier with no share is never
// replayed, so its turns are not planned.
func replayedTiers(cfg config.Run, sessions map[string][]load.Session) []string {
	share := map[string]float64{"heavy": cfg.Workload.Mix.Heavy, "light": cfg.Workload.Mix.Light}
	var out, rest []string
	for _, t := range []string{"heavy", "light"} {
		if _, ok := sessions[t]; ok && share[t] > 0 {
			out = append(out, t)
		}
	}
	for t := range sessions {
		if _, known := share[t]; !known {
			rest = append(rest, t)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// countOverContext counts, by tier, the planned turns (every turn of every
// session a replayed tier holds, subagents' included) that are over a
// context of n tokens; trace.OverContext is the rule.
func countOverContext(cfg config.Run, sessions map[string][]load.Session, n int, source string) *report.OverContext {
	oc := &report.OverContext{ContextTokens: n, Source: source, Skipped: cfg.Workload.SkipOverContext}
	for _, tier := range replayedTiers(cfg, sessions) {
		c := trace.ContextCount{Tier: tier}
		for _, s := range sessions[tier] {
			c.Add(s.Turns, n)
		}
		oc.Tiers = append(oc.Tiers, report.OverContextTier{Tier: tier, Turns: c.Turns, Over: c.Over, SubagentTurns: c.SubagentTurns, SubagentOver: c.SubagentOver})
	}
	return oc
}

// trimSessions drops from every session the turns over a context of n tokens
// and the rest of their conversations (trace.TrimToContext says why), and
// sessions left with nothing to send. It counts the dropped turns into oc.
// A replayed tier left with no session is an error.
func trimSessions(sessions map[string][]load.Session, n int, oc *report.OverContext) (map[string][]load.Session, error) {
	out := make(map[string][]load.Session, len(sessions))
	dropped := map[string]trace.ContextCount{}
	for tier, ss := range sessions {
		var d trace.ContextCount
		for _, s := range ss {
			kept, c := trace.TrimToContext(s.Turns, n)
			d.Dropped += c.Dropped
			d.SubagentDropped += c.SubagentDropped
			if len(kept) > 0 {
				s.Turns = kept
				out[tier] = append(out[tier], s)
			}
		}
		dropped[tier] = d
	}
	for i := range oc.Tiers {
		t := &oc.Tiers[i]
		t.Dropped, t.SubagentDropped = dropped[t.Tier].Dropped, dropped[t.Tier].SubagentDropped
		if len(out[t.Tier]) == 0 {
			return nil, fmt.Errorf("workload.skip_over_context: every %s session needs more than the %d-token context from its first turn on, so nothing of that tier is left to send: serve a larger context, or use other traces (workload.traces)", t.Tier, n)
		}
	}
	return out, nil
}

// checkContext is pre-flight's check of the planned turns against a served
// context of n tokens read from source (n = 0: not known). It returns the
// sessions to replay (trimmed when workload.skip_over_context is set), the
// counts for the report (nil when n is 0), and the pre-flight detail. It
// stops the run when a replayed tier has more than workload.max_over_context
// of its turns over the context and skipping is off: each such turn would be
// refused and end its conversation. The share is judged per tier because the
// mix weighs lanes, not turns: a heavy tier with 3% of its turns over loses
// that many conversations however many light turns fit.
func checkContext(cfg config.Run, sessions map[string][]load.Session, n int, source string) (map[string][]load.Session, *report.OverContext, string, error) {
	if n <= 0 {
		return sessions, nil, "the served context length is not known (the server reports no max_model_len or n_ctx, and recipe.max_model_len is unset): turns over it were not checked", nil
	}
	oc := countOverContext(cfg, sessions, n, source)
	var parts, over []string
	for _, t := range oc.Tiers {
		share := 0.0
		if t.Turns > 0 {
			share = float64(t.Over) / float64(t.Turns)
		}
		parts = append(parts, fmt.Sprintf("%s %d of %d (%.1f%%)", t.Tier, t.Over, t.Turns, 100*share))
		if share > cfg.Workload.MaxOver() {
			over = append(over, t.Tier)
		}
	}
	figure := fmt.Sprintf("planned turns over the %d-token context (%s; prompt + max_tokens): %s", n, source, strings.Join(parts, ", "))
	if cfg.Workload.SkipOverContext {
		trimmed, err := trimSessions(sessions, n, oc)
		if err != nil {
			return nil, oc, "", err
		}
		var drops []string
		for _, t := range oc.Tiers {
			drops = append(drops, fmt.Sprintf("%s %d (%d subagent)", t.Tier, t.Dropped, t.SubagentDropped))
		}
		return trimmed, oc, figure + "; skip_over_context: turns dropped with the rest of their conversations, never sent: " + strings.Join(drops, ", "), nil
	}
	if len(over) > 0 {
		return nil, oc, "", fmt.Errorf("%s; more than workload.max_over_context (%g%%) in %s: each would be refused and end its conversation. "+
			"Serve a larger context (the engine's --max-model-len, and recipe.max_model_len), set workload.skip_over_context: true to drop those turns (the report says how many), or use other traces (workload.traces)",
			figure, 100*cfg.Workload.MaxOver(), strings.Join(over, " and "))
	}
	for _, t := range oc.Tiers {
		if t.Over > 0 {
			return sessions, oc, figure + fmt.Sprintf("; within workload.max_over_context (%g%%), so they go out, are refused and end their conversations", 100*cfg.Workload.MaxOver()), nil
		}
	}
	return sessions, oc, figure, nil
}

// planContext is the context `headroom plan` checks the turns against,
// which sends nothing: recipe.max_model_len, else the simulator's profile
// when the endpoint is the built-in one; 0 when neither is known.
func planContext(cfg config.Run) (int, string) {
	if n := cfg.Recipe.MaxModelLen; n > 0 {
		return n, contextFromRecipe
	}
	if cfg.Recipe.Endpoint == config.SimEndpoint {
		if o, err := SimOptions(cfg.Recipe); err == nil && o.Profile.MaxModelLen > 0 {
			return o.Profile.MaxModelLen, contextFromSim
		}
	}
	return 0, ""
}

// fitContext reads the served context and checks the run's sessions against
// it (checkContext), replacing them with the trimmed ones when skipping; it
// keeps the counts for the summary and adds its finding to detail.
func (r *run) fitContext(ctx context.Context, cfg config.Run, endpoint string, acc access, sessions *map[string][]load.Session, detail string) (string, error) {
	n, src, err := contextLength(ctx, cfg, endpoint, acc)
	if err != nil {
		return "", err
	}
	s, oc, found, err := checkContext(cfg, *sessions, n, src)
	r.overContext, r.contextLen = oc, n
	if err != nil {
		return "", err
	}
	*sessions = s
	return detail + "; " + found, nil
}

// planContextNotes is what `headroom plan` says about the turns over the
// context: the counts pre-flight would find (nil when the context is not
// known before pre-flight) and a note, which says when pre-flight will stop.
func planContextNotes(cfg config.Run, sessions map[string][]load.Session) (*report.OverContext, string) {
	n, src := planContext(cfg)
	if n <= 0 {
		return nil, "the served context is not known before pre-flight reads it (recipe.max_model_len is unset): turns over it are not counted here"
	}
	_, oc, found, err := checkContext(cfg, sessions, n, src)
	if err != nil {
		return oc, "pre-flight will stop: " + err.Error()
	}
	return oc, found
}
