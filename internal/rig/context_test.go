package rig

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/trace"
)

// contextServer serves, on loopback, /v1/models and /props with the given
// bodies; an empty body is a 404, as a server without that route answers.
func contextServer(t *testing.T, models, props string) string {
	t.Helper()
	mux := http.NewServeMux()
	for path, body := range map[string]string{"/v1/models": models, "/props": props} {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			if body == "" {
				http.NotFound(w, nil)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		})
	}
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

func TestContextLength(t *testing.T) {
	// Bodies in the servers' own shapes: vLLM's model card (compact JSON);
	// SGLang's ModelCard (protocol.py: id, object, created, owned_by, root,
	// parent, max_model_len), spaced; llama.cpp's /v1/models (no context, only
	// meta.n_ctx_train, the training length) with /props
	// default_generation_settings.n_ctx, the per-slot context.
	const (
		vllm   = `{"object":"list","data":[{"id":"other","object":"model","max_model_len":4096},{"id":"m","object":"model","owned_by":"vllm","root":"m","parent":null,"max_model_len":524288,"permission":[]}]}`
		sglang = `{"object": "list", "data": [{"id": "m", "object": "model", "created": 1, "owned_by": "sglang", "root": "m", "parent": null, "max_model_len": 131072}]}`
		llama  = `{"object":"list","data":[{"id":"m","object":"model","owned_by":"llamacpp","meta":{"n_ctx_train":131072,"n_params":1}}]}`
		props  = `{"default_generation_settings":{"n_ctx":32768,"params":{"n_predict":-1}},"total_slots":4}`
		bare   = `{"object":"list","data":[{"id":"m","object":"model"}]}`
	)
	cases := []struct {
		name          string
		models, props string
		recipe        int // recipe.max_model_len
		want          int
		source        string
		err           string
	}{
		// vLLM reports the context on the model's own card, not another's.
		{"vllm", vllm, "", 0, 524288, contextFromModels, ""},
		// SGLang's /v1/models reports it too.
		{"sglang", sglang, "", 0, 131072, contextFromModels, ""},
		// llama.cpp's /v1/models has only the training length: /props says what one slot serves.
		{"llama.cpp", llama, props, 0, 32768, contextFromProps, ""},
		// A gateway that reports nothing: the recipe's figure is used.
		{"recipe fallback", bare, "", 200000, 200000, contextFromRecipe, ""},
		// Nothing anywhere: not known, no error.
		{"not known", bare, "", 0, 0, "", ""},
		// /props disagreeing with the recipe is the wrong recipe live.
		{"props mismatch", llama, props, 65536, 0, "", "the wrong recipe is live"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Recipe.Model, cfg.Recipe.MaxModelLen = "m", c.recipe
			url := contextServer(t, c.models, c.props)
			acc, err := resolveAccess(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			n, src, err := contextLength(context.Background(), cfg, url, acc)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || n != c.want || src != c.source {
				t.Errorf("got %d from %q (err %v), want %d from %q", n, src, err, c.want, c.source)
			}
		})
	}
}

// sessionsOf builds tier pools from turns given as prompt lengths; a
// negative length is a subagent turn of agent "a". Answers are 1 token.
func sessionsOf(tiers map[string][][]int) map[string][]load.Session {
	out := map[string][]load.Session{}
	for tier, ss := range tiers {
		for k, ins := range ss {
			s := load.Session{ID: tier + string(rune('0'+k)), Tier: tier}
			for i, in := range ins {
				t := trace.Turn{Index: i, In: in, Out: 1}
				if in < 0 {
					t.Agent, t.In = "a", -in
				}
				s.Turns = append(s.Turns, t)
			}
			out[tier] = append(out[tier], s)
		}
	}
	return out
}

func TestCheckContext(t *testing.T) {
	// 10 heavy turns, 2 of them over a 100-token context (one a subagent's);
	// 5 light turns, none over.
	pools := sessionsOf(map[string][][]int{
		"heavy": {{10, 20, -30, 200, 50}, {10, 20, -300, 30, 40}},
		"light": {{1, 2, 3, 4, 5}},
	})
	cfg := config.Default()
	t.Run("stops above the limit", func(t *testing.T) {
		_, oc, _, err := checkContext(cfg, pools, 100, contextFromModels)
		if err == nil {
			t.Fatal("20% of heavy turns over the context passed a 1% limit")
		}
		for _, want := range []string{"heavy 2 of 10 (20.0%)", "light 0 of 5 (0.0%)", "100-token context", "larger context", "workload.skip_over_context: true", "other traces"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if oc == nil || len(oc.Tiers) != 2 || oc.Tiers[0] != (report.OverContextTier{Tier: "heavy", Turns: 10, Over: 2, SubagentTurns: 2, SubagentOver: 1}) {
			t.Errorf("counts %+v: want heavy first with 2 of 10 over, 1 of 2 subagent turns", oc)
		}
	})
	t.Run("within the limit", func(t *testing.T) {
		c := cfg
		share := 0.25
		c.Workload.MaxOverContext = &share
		got, _, detail, err := checkContext(c, pools, 100, contextFromModels)
		if err != nil || !strings.Contains(detail, "heavy 2 of 10") || len(got["heavy"][0].Turns) != 5 {
			t.Errorf("a 25%% limit: err %v, detail %q; want the figure and nothing dropped", err, detail)
		}
	})
	t.Run("skips", func(t *testing.T) {
		c := cfg
		c.Workload.SkipOverContext = true
		got, oc, detail, err := checkContext(c, pools, 100, contextFromModels)
		if err != nil {
			t.Fatal(err)
		}
		// session 0: the parent's 200 cuts it and its 50; session 1: the
		// subagent's 300 cuts that subagent only.
		if n0, n1 := len(got["heavy"][0].Turns), len(got["heavy"][1].Turns); n0 != 3 || n1 != 4 {
			t.Errorf("kept %d and %d heavy turns, want 3 and 4", n0, n1)
		}
		if h := oc.Tiers[0]; h.Dropped != 3 || h.SubagentDropped != 1 || !oc.Skipped {
			t.Errorf("heavy counts %+v (skipped %v): want 3 dropped, 1 of them a subagent's", h, oc.Skipped)
		}
		if !strings.Contains(detail, "heavy 3 (1 subagent)") {
			t.Errorf("detail %q does not say how many were dropped", detail)
		}
		if len(pools["heavy"][0].Turns) != 5 {
			t.Error("trimming changed the sessions it was given")
		}
		for _, ss := range got {
			for _, s := range ss {
				for _, turn := range s.Turns {
					if trace.OverContext(turn, 100) {
						t.Errorf("session %s still sends turn %d of %d tokens", s.ID, turn.Index, turn.In)
					}
				}
			}
		}
	})
	t.Run("skipping empties a tier", func(t *testing.T) {
		c := cfg
		c.Workload.SkipOverContext = true
		_, _, _, err := checkContext(c, sessionsOf(map[string][][]int{"heavy": {{500, 10}}, "light": {{1}}}), 100, contextFromModels)
		if err == nil || !strings.Contains(err.Error(), "every heavy session") {
			t.Errorf("err = %v, want one saying nothing of the heavy tier is left", err)
		}
	})
	t.Run("a tier the mix never sends is not planned", func(t *testing.T) {
		c := cfg
		c.Workload.Mix.Heavy, c.Workload.Mix.Light = 0, 1
		_, oc, _, err := checkContext(c, pools, 100, contextFromModels)
		if err != nil || len(oc.Tiers) != 1 || oc.Tiers[0].Tier != "light" {
			t.Errorf("light-only mix: err %v, counts %+v; want light alone and no stop", err, oc)
		}
	})
	t.Run("not known", func(t *testing.T) {
		got, oc, detail, err := checkContext(cfg, pools, 0, "")
		if err != nil || oc != nil || !strings.Contains(detail, "not checked") || len(got["heavy"]) != 2 {
			t.Errorf("unknown context: err %v, counts %+v, detail %q; want \"not checked\" and nothing changed", err, oc, detail)
		}
	})
}

func TestPlanCountsTurnsOverContext(t *testing.T) {
	cfg := config.Default()
	cfg.Workload.SynthSessions = 40
	cfg.Recipe.MaxModelLen = 131072
	p, err := MakePlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.OverContext == nil || p.OverContext.ContextTokens != 131072 || p.OverContext.Source != contextFromRecipe || p.OverContext.Tiers[0].Over == 0 {
		t.Fatalf("plan counts %+v: want heavy turns over recipe.max_model_len", p.OverContext)
	}
	var b strings.Builder
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "pre-flight will stop") || !strings.Contains(b.String(), "131072-token context") {
		t.Errorf("plan text does not say pre-flight will stop on the turns over the context:\n%s", b.String())
	}
	// The built-in simulator's profile says its context without a recipe figure.
	cfg.Recipe.MaxModelLen = 0
	if p, _ = MakePlan(cfg); p.OverContext == nil || p.OverContext.Source != contextFromSim || p.OverContext.Tiers[0].Over != 0 {
		t.Errorf("plan against the default simulator: counts %+v, want none of 524288 over from its profile", p.OverContext)
	}
}

// TestRunStopsOnTurnsOverContext: synthesised heavy sessions against a
// simulator serving 128K: pre-flight stops with the figure before any load.
func TestRunStopsOnTurnsOverContext(t *testing.T) {
	cfg := config.Default()
	cfg.Recipe.Sim.Profile = "glm-16xrtx6000-128k"
	cfg.Workload.SynthSessions = 40
	cfg.Evals.Suites = nil
	cfg.Output = t.TempDir()
	sum, err := Run(context.Background(), Options{Config: cfg})
	var pe *PhaseError
	if !errors.As(err, &pe) || pe.Phase != PhasePreflight || !strings.Contains(err.Error(), "planned turns over the 131072-token context (/v1/models max_model_len") {
		t.Fatalf("err = %v, want pre-flight to stop on the turns over the context", err)
	}
	t.Log(err)
	if len(sum.Steps) != 0 || sum.OverContext == nil || sum.OverContext.Tiers[0].Over == 0 {
		t.Errorf("%d steps ran; counts %+v: want none, and the counts in the summary", len(sum.Steps), sum.OverContext)
	}
}

// TestRunSkipsTurnsOverContext runs one short step against a simulator
// serving 128K with skip_over_context: no turn over the context goes out,
// and the summary and report.md say how many were dropped.
func TestRunSkipsTurnsOverContext(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short sweep")
	}
	cfg := config.Default()
	cfg.TimeScale = config.Virtual
	cfg.Recipe.Sim.Profile = "glm-16xrtx6000-128k"
	cfg.Workload.SynthSessions, cfg.Workload.SkipOverContext = 40, true
	cfg.Evals.Suites = nil
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{4}, 4, 0
	cfg.Sweep.WarmupS, cfg.Sweep.StepS = 60, 120
	cfg.Output = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), Options{Config: cfg})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	oc := sum.OverContext
	if oc == nil || !oc.Skipped || oc.Tiers[0].Tier != "heavy" || oc.Tiers[0].Dropped < oc.Tiers[0].Over || oc.Tiers[0].Over == 0 {
		t.Fatalf("counts %+v: want heavy turns over the context, all of them dropped", oc)
	}
	recs, err := load.ReadRecords(filepath.Join(sum.RunDir, "records.jsonl"))
	if err != nil || len(recs) == 0 {
		t.Fatalf("records: %d, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.PlannedPromptTokens+r.MaxTokens > 131072 {
			t.Errorf("a turn of %d prompt tokens and max_tokens %d went out against a 131072-token context", r.PlannedPromptTokens, r.MaxTokens)
			break
		}
	}
	md, err := os.ReadFile(filepath.Join(sum.RunDir, "report.md"))
	if err != nil || !strings.Contains(string(md), "## Turns over the served context") || !strings.Contains(string(md), "were dropped and never sent") {
		t.Errorf("report.md does not say what was dropped (err %v)", err)
	}
	for _, l := range oc.Lines() {
		t.Log(l)
	}
	var b strings.Builder
	if err := report.WriteText(&b, sum); err != nil || !strings.Contains(b.String(), "over context: heavy:") {
		t.Errorf("the text summary does not say what was dropped (err %v):\n%s", err, b.String())
	}
}
