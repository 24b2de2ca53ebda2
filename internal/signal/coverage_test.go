package signal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// families parses exposition texts, one per target: a name ending in .txt
// is a testdata file, anything else is the text itself.
func families(t *testing.T, targets ...string) []map[string]*dto.MetricFamily {
	t.Helper()
	var out []map[string]*dto.MetricFamily
	for _, tg := range targets {
		text := tg
		if strings.HasSuffix(tg, ".txt") {
			b, err := os.ReadFile(filepath.Join("testdata", tg))
			if err != nil {
				t.Fatal(err)
			}
			text = string(b)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(text))
		if err != nil {
			t.Fatalf("%.40q: %v", tg, err)
		}
		out = append(out, fams)
	}
	return out
}

// barNeeds is what the bar needs, as pre-flight asks for it.
var barNeeds = [][]string{{TTFT}, {TPOT, ITL}, {RequestsAborted}, {HTTP4xx}, {HTTP5xx}}

// vllmFinishedOnly is the vLLM mapping as it was before it knew the
// finish_reason spelling: the rule that read 0 against a stand-in.
func vllmFinishedOnly() Mapping {
	var m Mapping
	for _, r := range VLLM() {
		if _, other := r.Match["finish_reason"]; !other {
			m = append(m, r)
		}
	}
	return m
}

// wantProblem is a problem a case expects: its common name, whether it is
// a note, and substrings of its text.
type wantProblem struct {
	common string
	note   bool
	text   []string
}

func TestCoverage(t *testing.T) {
	const successReason = `# TYPE vllm:request_success_total counter
vllm:request_success_total{model_name="m",reason="stop"} 3
vllm:request_success_total{model_name="m",reason="abort"} 1
`
	const ttftOnly = `# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="1"} 1
vllm:time_to_first_token_seconds_bucket{le="+Inf"} 1
vllm:time_to_first_token_seconds_sum 0.5
vllm:time_to_first_token_seconds_count 1
`
	cases := []struct {
		name    string
		m       Mapping
		targets []string
		need    [][]string
		want    []wantProblem
	}{
		// real vLLM (finished_reason, HTTP counters): everything is read;
		// no 5xx has happened yet, which is a note saying what is there.
		{"vllm", VLLM(), []string{"vllm_metrics.txt"}, barNeeds,
			[]wantProblem{{HTTP5xx, true, []string{`{handler=~"/v1/chat/completions", status=~"5xx"}`, "status (2xx, 4xx)"}}}},
		// a stand-in labelling finish_reason: read by the second spelling;
		// it has no abort series yet, which is only a note.
		{"vllm stand-in", VLLM(), []string{"vllm_finish_reason_metrics.txt"}, barNeeds[:3],
			[]wantProblem{{RequestsAborted, true, []string{`finish_reason=~"abort"`, "tool_calls", "reads 0 until one does"}}}},
		// the mapping that knew only finished_reason: aborts would read 0
		// all run, and the problem names the labels the server has.
		{"finished_reason only", vllmFinishedOnly(), []string{"vllm_finish_reason_metrics.txt"}, barNeeds[:3],
			[]wantProblem{{RequestsAborted, false, []string{
				"vllm:request_success_total has labels finish_reason (length, remote_decode, stop, tool_calls), model_name (Qwen/Qwen3-8B)",
				"the rule for requests_aborted matches finished_reason", "read 0 all run", "recipe.mapping_file"}}}},
		// neither spelling: both rules are named.
		{"neither spelling", VLLM(), []string{ttftOnly + successReason}, [][]string{{RequestsAborted}},
			[]wantProblem{{RequestsAborted, false, []string{"has labels model_name (m), reason (abort, stop)", "the rules for requests_aborted match finished_reason or finish_reason"}}}},
		// the label is spread over targets: one series anywhere is enough.
		{"two targets", VLLM(), []string{ttftOnly, "vllm:request_success_total{finished_reason=\"abort\"} 0\n"}, [][]string{{TTFT}, {RequestsAborted}}, nil},
		// gen_ai with 429 and 500 series: both classes are read.
		{"gen_ai", GenAI(), []string{"gen_ai_metrics.txt"}, [][]string{{TTFT}, {TPOT, ITL}, {HTTP4xx}, {HTTP5xx}}, nil},
		// a gateway that has failed nothing yet has no error_type at all;
		// gen_ai's success rule reads series without it, so it is optional
		// and the error classes are notes, not a wrong label.
		{"gen_ai no errors yet", GenAI(), []string{`# TYPE gen_ai_server_request_duration_seconds histogram
gen_ai_server_request_duration_seconds_bucket{gen_ai_request_model="m",le="+Inf"} 5
gen_ai_server_request_duration_seconds_sum{gen_ai_request_model="m"} 5
gen_ai_server_request_duration_seconds_count{gen_ai_request_model="m"} 5
`}, [][]string{{HTTP4xx}},
			[]wantProblem{{HTTP4xx, true, []string{`error_type=~"4[0-9][0-9]"`, "label gen_ai_request_model (m)"}}}},
		// Modelplane behind Envoy AI Gateway: every failure is _OTHER, so
		// neither HTTP class has a series (notes that say what is there),
		// and nothing counts aborted requests.
		{"modelplane", Modelplane(), []string{"modelplane_metrics.txt"}, barNeeds,
			[]wantProblem{
				{RequestsAborted, false, []string{"no rule for requests_aborted"}},
				{HTTP4xx, true, []string{"error_type (_OTHER)"}},
				{HTTP5xx, true, []string{"error_type (_OTHER)"}},
			}},
		// the SGLang mapping against vLLM: the families are not there.
		{"wrong engine", SGLang(), []string{"vllm_metrics.txt"}, [][]string{{TTFT}},
			[]wantProblem{{TTFT, false, []string{"sglang:time_to_first_token_seconds is in no target's metrics"}}}},
		// interactivity: TPOT missing is fine while ITL is read; with both
		// missing, both are named.
		{"itl stands in", VLLM(), []string{"vllm_finish_reason_metrics.txt"}, [][]string{{TPOT, ITL}}, nil},
		{"neither tpot nor itl", VLLM(), []string{ttftOnly}, [][]string{{TPOT, ITL}},
			[]wantProblem{{TPOT, false, []string{"vllm:request_time_per_output_token_seconds"}}, {ITL, false, []string{"vllm:inter_token_latency_seconds"}}}},
		// a histogram rule on a counter family reads nothing.
		{"wrong kind", Mapping{{Common: TTFT, Metric: "ttft", Kind: Histogram}}, []string{"ttft 3\n"}, [][]string{{TTFT}},
			[]wantProblem{{TTFT, false, []string{"ttft is a untyped family", "reads it as a histogram"}}}},
		// a histogram whose matcher selects nothing has no data at all.
		{"histogram value", Mapping{{Common: TTFT, Metric: "vllm:time_to_first_token_seconds", Match: map[string]string{"model_name": "other"}, Kind: Histogram}},
			[]string{strings.ReplaceAll(ttftOnly, `{le=`, `{model_name="m",le=`)}, [][]string{{TTFT}},
			[]wantProblem{{TTFT, false, []string{`model_name=~"other"`, "has no data"}}}},
		// a broken mapping is a problem, not a panic.
		{"bad mapping", Mapping{{Common: "ttft", Metric: "x", Kind: Histogram}}, nil, barNeeds,
			[]wantProblem{{"", false, []string{"not a common name"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.m.Coverage(families(t, c.targets...), c.need)
			if len(got) != len(c.want) {
				t.Fatalf("%d problems, want %d: %q", len(got), len(c.want), got)
			}
			for i, w := range c.want {
				p := got[i]
				if p.Common != w.common || p.Note != w.note {
					t.Errorf("problem %d: %s note=%v, want %s note=%v (%s)", i, p.Common, p.Note, w.common, w.note, p.Text)
				}
				for _, s := range w.text {
					if !strings.Contains(p.Text, s) {
						t.Errorf("problem %d %q does not say %q", i, p.Text, s)
					}
				}
			}
		})
	}
}

// TestCoverageNoSeries: a family with no series (expfmt's parser drops
// such families, a Prometheus source may not) is a note for a counter, which
// reads 0 until a series appears, and a problem for a histogram.
func TestCoverageNoSeries(t *testing.T) {
	counter, histogram := dto.MetricType_COUNTER, dto.MetricType_HISTOGRAM
	name := func(s string) *string { return &s }
	fams := []map[string]*dto.MetricFamily{{
		"vllm:request_success_total":       {Name: name("vllm:request_success_total"), Type: &counter},
		"vllm:time_to_first_token_seconds": {Name: name("vllm:time_to_first_token_seconds"), Type: &histogram},
	}}
	got := VLLM().Coverage(fams, [][]string{{TTFT}, {RequestsAborted}})
	if len(got) != 2 || got[0].Note || !strings.Contains(got[0].Text, "has no series, so ttft_seconds has no data") ||
		!got[1].Note || !strings.Contains(got[1].Text, "has no series yet") {
		t.Errorf("problems %q, want the histogram's problem and the counter's note", got)
	}
}

func TestBucketNotes(t *testing.T) {
	ms := `# TYPE ttft_ms histogram
ttft_ms_bucket{le="5000"} 1
ttft_ms_bucket{le="7500"} 2
ttft_ms_bucket{le="+Inf"} 2
ttft_ms_sum 9000
ttft_ms_count 2
`
	cases := []struct {
		name        string
		m           Mapping
		target      string
		ttft, speed float64
		want        []string // substrings, one note each; nil for no note
	}{
		// the default bar: 5.3 s is inside vLLM's (5, 7.5]; 10 tokens/s is
		// 0.1 s per token, a TPOT bucket edge.
		{"vllm default bar", VLLM(), "vllm_metrics.txt", 5.3, 10,
			[]string{"the TTFT bar 5.3 s sits inside the bucket (5, 7.5] of vllm:time_to_first_token_seconds", "reads too close", "finer buckets", "(5 s or 7.5 s)"}},
		// bars on edges say nothing.
		{"edges", VLLM(), "vllm_metrics.txt", 5, 20, nil},
		// 12 tokens/s is 0.0833 s per token, inside (0.075, 0.1].
		{"speed inside", VLLM(), "vllm_metrics.txt", 0, 12,
			[]string{"the interactivity bar 12 tokens/s is 0.08333 s per token, inside the bucket (0.075, 0.1] s of vllm:request_time_per_output_token_seconds (10 to 13.33 tokens/s)", "(10 or 13.33 tokens/s)"}},
		// without TPOT interactivity is derived from inter-token latency's
		// sum and count, a mean that no bucket bounds: no note.
		{"speed on itl", VLLM(), "vllm_finish_reason_metrics.txt", 0, 12, nil},
		// the same for SGLang, whose 12 tokens/s (0.0833 s) sits inside its
		// ITL bucket (0.08, 0.1].
		{"sglang speed", SGLang(), "sglang_metrics.txt", 0, 12, nil},
		// 200 tokens/s is below the first bound, 0.01 s.
		{"speed above every bucket", VLLM(), "vllm_metrics.txt", 0, 200, []string{"(0, 0.01] s", "above 100 tokens/s", "(100 tokens/s)"}},
		// a bar past the last finite bound.
		{"ttft above every bucket", VLLM(), "vllm_metrics.txt", 3000, 0, []string{"above the last finite bucket bound of vllm:time_to_first_token_seconds (2560 s)"}},
		// SGLang's TTFT buckets are coarser: 5.3 s is inside (4, 6].
		{"sglang", SGLang(), "sglang_metrics.txt", 5.3, 0, []string{"(4, 6] of sglang:time_to_first_token_seconds"}},
		// the bounds are in seconds after the rule's scale.
		{"scaled", Mapping{{Common: TTFT, Metric: "ttft_ms", Kind: Histogram, Scale: 0.001}}, ms, 5.3, 0, []string{"(5, 7.5] of ttft_ms"}},
		// no histogram, no bar: nothing to say.
		{"no bar", VLLM(), "vllm_metrics.txt", 0, 0, nil},
		{"no histogram", SGLang(), "vllm_metrics.txt", 5.3, 12, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.m.BucketNotes(families(t, c.target), c.ttft, c.speed)
			if c.want == nil {
				if len(got) != 0 {
					t.Errorf("notes %q, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("notes %q, want one", got)
			}
			for _, s := range c.want {
				if !strings.Contains(got[0], s) {
					t.Errorf("note %q does not say %q", got[0], s)
				}
			}
		})
	}
}

// TestCoverageAlternativeWithoutRule: a mapping with a rule for one
// alternative of a group (requests_failed, as Modelplane's and the gen_ai
// mappings have) and none for the other (requests_aborted) is covered when
// that rule's family is there: the absent alternative is no problem, and a
// rule whose counter has no series yet is only a note (pre-flight refused
// such a mapping on a fresh gateway).
func TestCoverageAlternativeWithoutRule(t *testing.T) {
	counter := dto.MetricType_COUNTER
	name := func(s string) *string { return &s }
	m := Mapping{{Common: RequestsFailed, Metric: "gw_requests_failed_total", Kind: Counter}}
	fams := []map[string]*dto.MetricFamily{{"gw_requests_failed_total": {Name: name("gw_requests_failed_total"), Type: &counter}}}
	got := m.Coverage(fams, [][]string{{RequestsAborted, RequestsFailed}})
	if len(got) != 1 || !got[0].Note || got[0].Common != RequestsFailed {
		t.Errorf("problems %q: want only the note that %s has no series yet", got, RequestsFailed)
	}
	// neither alternative has a rule: that is still a problem, named for both
	got = Mapping{}.Coverage(fams, [][]string{{RequestsAborted, RequestsFailed}})
	if len(got) != 2 || got[0].Note || got[1].Note {
		t.Errorf("problems %q: want both alternatives' missing rules, not notes", got)
	}
}
