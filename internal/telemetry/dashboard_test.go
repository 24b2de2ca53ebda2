package telemetry

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/signal"
)

// dashboard is the part of deploy/grafana/headroom.json the tests read.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
			Regex string `json:"regex"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID          int    `json:"id"`
	Title       string `json:"title"`
	Type        string `json:"type"`
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds *struct {
				Steps []struct {
					Color string   `json:"color"`
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
			Custom struct {
				ThresholdsStyle struct {
					Mode string `json:"mode"`
				} `json:"thresholdsStyle"`
			} `json:"custom"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		Instant      bool   `json:"instant"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	Transformations []struct {
		ID      string `json:"id"`
		Options struct {
			ConfigRefID string `json:"configRefId"`
			Mappings    []struct {
				FieldName  string `json:"fieldName"`
				HandlerKey string `json:"handlerKey"`
			} `json:"mappings"`
		} `json:"options"`
	} `json:"transformations"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("../../deploy/grafana/headroom.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	return d
}

// knownMetrics are the series names that exist: headroom's own (this
// package's registry) and every metric the engine mappings read, with the
// _bucket, _sum and _count series of histograms, and vLLM's HTTP counter.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	tel := New("r", "dev")
	tel.ObserveStep(1, "pass") // so the verdict gauge has a series
	fams, err := tel.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		known[f.GetName()] = true
	}
	for _, name := range signal.MappingNames() {
		m, err := signal.MappingByName(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range m {
			known[r.Metric] = true
			if r.Kind == signal.Histogram || r.Field != "" {
				for _, sfx := range []string{"_bucket", "_sum", "_count"} {
					known[r.Metric+sfx] = true
				}
			}
		}
	}
	return known
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	braces     = regexp.MustCompile(`\{[^{}]*\}`)
	ranges     = regexp.MustCompile(`\[[^\]]*\]`)
	grouping   = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifier = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	nameRegex  = regexp.MustCompile(`__name__\s*=~?\s*"([^"]*)"`)
	labelVals  = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)
	keywords   = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
)

// metricNames lists the metric names a PromQL expression (or a Grafana
// label_values(selector, label) query) reads: bare names and __name__
// matchers, not functions, label names, label values or keywords.
func metricNames(expr string) []string {
	if m := labelVals.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	var out []string
	for _, m := range nameRegex.FindAllStringSubmatch(expr, -1) {
		out = append(out, strings.Split(m[1], "|")...)
	}
	e := quoted.ReplaceAllString(expr, `""`)
	for braces.MatchString(e) {
		e = braces.ReplaceAllString(e, " ")
	}
	e = ranges.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	for _, loc := range identifier.FindAllStringIndex(e, -1) {
		word := e[loc[0]:loc[1]]
		rest := strings.TrimLeft(e[loc[1]:], " ")
		if strings.HasPrefix(rest, "(") || keywords[strings.ToLower(word)] || (loc[0] > 0 && e[loc[0]-1] == '$') {
			continue // a function or aggregation, a keyword, a variable
		}
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // the exponent or unit of a number
		}
		out = append(out, word)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	cases := []struct{ expr, want string }{
		{`histogram_quantile(0.9, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{model_name=~"$model",job=~"a|b"}[$__rate_interval])))`, "vllm:time_to_first_token_seconds_bucket"},
		{`(sum(rate(headroom_requests_failed_total[5m])) or vector(0)) / (sum(rate(headroom_requests_sent_total[5m])) > 0)`, "headroom_requests_failed_total headroom_requests_sent_total"},
		{`label_values({__name__=~"vllm:num_requests_running|sglang:num_running_reqs"}, model_name)`, "vllm:num_requests_running sglang:num_running_reqs"},
		{`label_values(headroom_run_info, recipe)`, "headroom_run_info"},
		{`headroom_step_verdict == 1`, "headroom_step_verdict"},
		{`sum(rate(http_requests_total{handler="/v1/chat/completions",status=~"4xx|5xx"}[1m])) or vector(0)`, "http_requests_total"},
	}
	for _, c := range cases {
		if got := strings.Join(metricNames(c.expr), " "); got != c.want {
			t.Errorf("metricNames(%s) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// exprs are every PromQL expression in the dashboard: its panels' queries
// and its variables'.
func (d dashboard) exprs() []string {
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		switch q := v.Query.(type) {
		case map[string]any:
			if s, ok := q["query"].(string); ok && v.Type == "query" {
				out = append(out, s)
			}
		case string:
			if v.Type == "query" {
				out = append(out, q)
			}
		}
	}
	return out
}

// TestDashboardQueriesRealMetrics checks deploy/grafana/headroom.json
// queries only metrics that exist (headroom's own, and the engines' as
// internal/signal/engines.go names them), with balanced brackets.
func TestDashboardQueriesRealMetrics(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Error("dashboard has no title or uid")
	}
	known := knownMetrics(t)
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
	read := map[string]bool{}
	for _, e := range d.exprs() {
		for _, pair := range []string{"()", "{}", "[]"} {
			if strings.Count(e, pair[:1]) != strings.Count(e, pair[1:]) {
				t.Errorf("unbalanced %s in %s", pair, e)
			}
		}
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("query %s reads no metric", e)
		}
		for _, m := range names {
			read[m] = true
			if !known[m] {
				t.Errorf("query %s reads %s, which neither headroom nor the vllm, sglang, modelplane or gen_ai mappings know", e, m)
			}
		}
	}
	// Every engine's TTFT, running gauge and KV cache, under its own names.
	for _, name := range []string{"vllm", "sglang", "modelplane"} {
		m, _ := signal.MappingByName(name)
		for _, r := range m {
			switch r.Common {
			case signal.TTFT, signal.Running, signal.Waiting, signal.KVCacheUsage:
				want := r.Metric
				if r.Kind == signal.Histogram {
					want += "_bucket"
				}
				if !read[want] {
					t.Errorf("no panel reads %s's %s (%s)", name, r.Common, want)
				}
			}
		}
	}
}

// TestDashboardDrawsTheBar checks the bar is drawn as thresholds taken
// from headroom_bar_*, that the variables exist and are used, that errors
// read 0 in a healthy run, and that units fit what is plotted.
func TestDashboardDrawsTheBar(t *testing.T) {
	d := readDashboard(t)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range []string{"model", "namespace", "job"} {
		if !vars[v] {
			t.Errorf("no $%s variable", v)
		}
	}
	bars := map[string]bool{}
	usesVar := map[string]bool{}
	for _, p := range d.Panels {
		var plotted []string
		bar := ""
		for _, tg := range p.Targets {
			for _, v := range []string{"model", "namespace", "job"} {
				if strings.Contains(tg.Expr, "$"+v) {
					usesVar[v] = true
				}
			}
			if strings.HasPrefix(tg.Expr, "headroom_bar_") {
				bar = tg.RefID
				bars[strings.SplitN(tg.Expr, "{", 2)[0]] = true
				if !tg.Instant {
					t.Errorf("%q: the bar query %s is not instant", p.Title, tg.Expr)
				}
				continue
			}
			plotted = append(plotted, tg.Expr)
		}
		all := strings.Join(plotted, "\n")
		title := strings.ToLower(p.Title)
		// The bar of what the panel plots: TTFT, interactivity, error share.
		var wantBar string
		switch {
		case strings.Contains(title, "ttft"):
			wantBar = "ttft"
		case strings.Contains(title, "interactivity"):
			wantBar = "interactivity"
		case strings.Contains(title, "error share"):
			wantBar = "error"
		}
		if wantBar != "" {
			if bar == "" {
				t.Errorf("%q draws no bar", p.Title)
			} else {
				mapped := false
				for _, tr := range p.Transformations {
					if tr.ID == "configFromData" && tr.Options.ConfigRefID == bar {
						for _, m := range tr.Options.Mappings {
							mapped = mapped || m.HandlerKey == "threshold1"
						}
					}
				}
				if !mapped {
					t.Errorf("%q: the bar query %s is not turned into a threshold (configFromData -> threshold1)", p.Title, bar)
				}
				if mode := p.FieldConfig.Defaults.Custom.ThresholdsStyle.Mode; mode == "" || mode == "off" {
					t.Errorf("%q: thresholds are not drawn (thresholdsStyle %q)", p.Title, mode)
				}
				if th := p.FieldConfig.Defaults.Thresholds; th == nil || len(th.Steps) != 2 {
					t.Errorf("%q: want a base step and the bar's step", p.Title)
				} else if below := th.Steps[0].Color == "red"; below != (wantBar == "interactivity") {
					t.Errorf("%q: the wrong side of the bar is red (interactivity fails below it, the others above)", p.Title)
				}
			}
		}
		// Errors read 0, not nothing, when nothing failed.
		if strings.Contains(title, "error") {
			for _, e := range plotted {
				if !strings.Contains(e, "or vector(0)") {
					t.Errorf("%q: %s reads nothing in a healthy run; add `or vector(0)`", p.Title, e)
				}
			}
		}
		// Units.
		unit := p.FieldConfig.Defaults.Unit
		var wantUnit string
		switch {
		case strings.Contains(all, "1 / histogram_quantile") || strings.Contains(all, "interactivity") || strings.Contains(title, "interactivity"):
			wantUnit = "tok/s"
		case strings.Contains(all, "histogram_quantile") && strings.Contains(all, "_seconds_bucket"), strings.HasSuffix(strings.TrimSpace(all), "_seconds"):
			wantUnit = "s"
		case strings.Contains(all, "kv_cache") || strings.Contains(all, "token_usage"), strings.Contains(title, "error share"):
			wantUnit = "percentunit"
		case strings.Contains(all, "rate("):
			wantUnit = "ps"
		}
		if wantUnit != "" && !(unit == wantUnit || strings.HasSuffix(unit, wantUnit) || strings.Contains(unit, wantUnit)) {
			t.Errorf("%q: unit %q, want %s for %s", p.Title, unit, wantUnit, all)
		}
	}
	for _, b := range []string{"headroom_bar_ttft_p90_seconds", "headroom_bar_interactivity_p90_tokens_per_second", "headroom_bar_error_rate"} {
		if !bars[b] {
			t.Errorf("no panel draws %s", b)
		}
	}
	for _, v := range []string{"model", "namespace", "job"} {
		if !usesVar[v] {
			t.Errorf("no query uses $%s", v)
		}
	}
}

// TestHelpNamesRealMetrics checks every HELP text that names a metric
// names one that exists, and that every metric has a HELP text.
func TestHelpNamesRealMetrics(t *testing.T) {
	known := knownMetrics(t)
	fams, err := New("r", "dev").Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	mention := regexp.MustCompile(`\b(headroom_[a-z0-9_]+|[a-z]+:[a-z0-9_]+)`)
	for _, f := range fams {
		if strings.TrimSpace(f.GetHelp()) == "" {
			t.Errorf("%s has no HELP", f.GetName())
		}
		for _, m := range mention.FindAllString(f.GetHelp(), -1) {
			if !known[m] {
				t.Errorf("%s's HELP names %s, which does not exist: %q", f.GetName(), m, f.GetHelp())
			}
		}
	}
	// The error classes HELP lists are the load generator's.
	for _, f := range fams {
		if f.GetName() == "headroom_requests_failed_total" {
			for _, c := range ErrorClasses {
				if !strings.Contains(f.GetHelp(), c) {
					t.Errorf("headroom_requests_failed_total's HELP lacks the class %s", c)
				}
			}
			if n := len(f.GetMetric()); n != len(ErrorClasses) {
				t.Errorf("%d failed-request series before any failure, want one per class (%d) at 0", n, len(ErrorClasses))
			}
		}
	}
	if !slices.Contains(Phases, "mini evals") || !slices.Contains(Phases, "rollout") {
		t.Errorf("Phases %v are not the phases rig names", Phases)
	}
}

// variable is the dashboard's variable name and its query ("" if none).
func (d dashboard) variable(name string) (query, regex string, ok bool) {
	for _, v := range d.Templating.List {
		if v.Name != name {
			continue
		}
		switch q := v.Query.(type) {
		case map[string]any:
			query, _ = q["query"].(string)
		case string:
			query = q
		}
		return query, v.Regex, true
	}
	return "", "", false
}

// TestDashboardP90PanelsComputeP90s: "SGLang: P90 interactivity" plotted
// a mean (the histogram's _count over its _sum). A panel whose title says
// P90 plots headroom's own running P90 or a histogram_quantile(0.9, ...)
// over the rate of a histogram's buckets; a mean beside it says so in its
// legend.
func TestDashboardP90PanelsComputeP90s(t *testing.T) {
	d := readDashboard(t)
	p90 := regexp.MustCompile(`histogram_quantile\(\s*0\.9\s*,\s*sum by \(le\) \(rate\([a-z_:]+_bucket\{[^}]*\}\[\$__rate_interval\]\)\)\)`)
	seen := 0
	for _, p := range d.Panels {
		if !strings.Contains(p.Title, "P90") {
			continue
		}
		seen++
		quantiles := 0
		for _, tg := range p.Targets {
			e := tg.Expr
			switch {
			case strings.HasPrefix(e, "headroom_bar_"):
			case strings.HasPrefix(e, "headroom_") && strings.Contains(e, "_p90_"):
				quantiles++ // headroom's own running P90
			case p90.MatchString(e):
				quantiles++
			case strings.Contains(e, "_count") && strings.Contains(e, "_sum"):
				if !strings.Contains(strings.ToLower(tg.LegendFormat), "mean") {
					t.Errorf("%q: %s is a mean, and its legend %q does not say so", p.Title, e, tg.LegendFormat)
				}
			default:
				t.Errorf("%q: %s is no P90 from a histogram's buckets", p.Title, e)
			}
		}
		if quantiles == 0 {
			t.Errorf("%q plots no P90", p.Title)
		}
	}
	if seen < 8 {
		t.Errorf("%d P90 panels, want headroom's and each engine's", seen)
	}
}

// TestDashboardModelVariableCoversEveryEngine: $model was filled from vLLM
// and SGLang only, so Modelplane's panels (gen_ai_request_model=~"$model")
// worked only with All. Every label a panel matches against $model is one
// the variable reads, and its regex takes the value from each.
func TestDashboardModelVariableCoversEveryEngine(t *testing.T) {
	d := readDashboard(t)
	query, regex, ok := d.variable("model")
	if !ok {
		t.Fatal("no $model variable")
	}
	labels := map[string]bool{}
	byModel := regexp.MustCompile(`([a-z_]+)=~"\$model"`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range byModel.FindAllStringSubmatch(tg.Expr, -1) {
				labels[m[1]] = true
			}
		}
	}
	if !labels["gen_ai_request_model"] || !labels["model_name"] {
		t.Fatalf("panels match $model against %v, want Modelplane's gen_ai_request_model and vLLM's and SGLang's model_name", labels)
	}
	// the series the variable reads: each engine's
	for _, m := range []string{"vllm:", "sglang:", "modelplane_frontend_"} {
		if !slices.ContainsFunc(metricNames(query), func(n string) bool { return strings.HasPrefix(n, m) }) {
			t.Errorf("$model (%s) reads no %s series", query, m)
		}
	}
	if strings.HasPrefix(query, "label_values(") {
		// one label only: label_values cannot read two
		if len(labels) > 1 {
			t.Fatalf("$model is label_values(...) of one label, and the panels match it against %v", labels)
		}
		return
	}
	re, err := regexp.Compile(strings.TrimSuffix(strings.TrimPrefix(regex, "/"), "/"))
	if err != nil || regex == "" {
		t.Fatalf("$model's regex %q: %v", regex, err)
	}
	// a query_result answer names each series by its labels
	for l := range labels {
		if !strings.Contains(query, l) {
			t.Errorf("$model (%s) does not keep the label %s", query, l)
		}
		line := `{` + l + `="glm-4.5-air"} 3 1764660000000`
		if m := re.FindStringSubmatch(line); len(m) != 2 || m[1] != "glm-4.5-air" {
			t.Errorf("$model's regex %s takes %q from %s, want glm-4.5-air", regex, m, line)
		}
	}
}

// TestDashboardHeadroomPanelsFilterByJobAndNamespace: headroom's own
// series had no job or namespace filter, so two runs scraped at once
// mixed. Every headroom_* selector matches $headroom_namespace and
// $headroom_job, read from headroom_run_info.
func TestDashboardHeadroomPanelsFilterByJobAndNamespace(t *testing.T) {
	d := readDashboard(t)
	for _, v := range []string{"headroom_namespace", "headroom_job"} {
		q, _, ok := d.variable(v)
		if !ok || !slices.Contains(metricNames(q), "headroom_run_info") {
			t.Errorf("$%s: %q, want a variable read from headroom_run_info", v, q)
		}
	}
	selector := regexp.MustCompile(`\b(headroom_[a-z0-9_]+)\b(\{[^}]*\})?`)
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range selector.FindAllStringSubmatch(tg.Expr, -1) {
				n++
				if !strings.Contains(m[2], `namespace=~"$headroom_namespace"`) || !strings.Contains(m[2], `job=~"$headroom_job"`) {
					t.Errorf("%q: %s%s has no $headroom_namespace and $headroom_job filter", p.Title, m[1], m[2])
				}
			}
		}
	}
	if n < 12 {
		t.Errorf("%d headroom_* selectors, want the headroom panels' and every bar", n)
	}
}

// TestDashboardCountsStepsFromOne: the step panel showed headroom_step, the
// 0-based index, where the reports, steps.csv and the PR comment count
// from 1.
func TestDashboardCountsStepsFromOne(t *testing.T) {
	d := readDashboard(t)
	found := false
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if !slices.Contains(metricNames(tg.Expr), "headroom_step") {
				continue
			}
			found = true
			if !strings.HasSuffix(strings.TrimSpace(tg.Expr), "+ 1") || !strings.Contains(tg.Expr, ">= 0") || strings.Contains(p.Title, "0-based") {
				t.Errorf("%q: %s, want the step counted from 1 (headroom_step + 1) and nothing outside the sweep (-1)", p.Title, tg.Expr)
			}
		}
	}
	if !found {
		t.Error("no panel shows headroom_step")
	}
}
