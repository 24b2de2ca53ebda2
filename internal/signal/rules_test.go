package signal

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-bench/headroom/internal/transport"
)

// exposition is an engine's exposition in testdata and the mapping that
// reads it.
type exposition struct {
	file string
	m    Mapping
}

// engineExpositions is every engine's exposition in testdata, each with
// its mapping, made afresh for each call (a test may change a mapping in
// place).
func engineExpositions() []exposition {
	return []exposition{
		{"vllm_metrics.txt", VLLM()},
		{"vllm_finish_reason_metrics.txt", VLLM()},
		{"sglang_metrics.txt", SGLang()},
		{"modelplane_metrics.txt", Modelplane()},
		{"gen_ai_metrics.txt", GenAI()},
	}
}

func engineMappings() map[string]Mapping {
	return map[string]Mapping{"vllm": VLLM(), "sglang": SGLang(), "modelplane": Modelplane(), "gen_ai": GenAI()}
}

func parseTestdata(t *testing.T, file string) map[string]*dto.MetricFamily {
	t.Helper()
	text, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	fams, err := parseText(text)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// Rules compiled once read every engine's exposition as compiling them on
// each call does: the same sample and the same error, with every mapping
// (an exposition read with another engine's mapping exercises the rules
// that find nothing or the wrong type), and again on later calls.
func TestCompiledRulesReadTheSame(t *testing.T) {
	for _, e := range engineExpositions() {
		file := e.file
		fams := parseTestdata(t, file)
		for name, m := range engineMappings() {
			var cache ruleCache
			for i := range 3 {
				want, got := NewSample(time.Second), NewSample(time.Second)
				errWant := m.add(fams, "t", &want)
				errGot := cache.get(m).apply(fams, "t", &got)
				if (errWant == nil) != (errGot == nil) || (errWant != nil && errWant.Error() != errGot.Error()) {
					t.Errorf("%s with %s, call %d: error %v, want %v", file, name, i, errGot, errWant)
				}
				if !reflect.DeepEqual(want, got) {
					t.Errorf("%s with %s, call %d: sample %+v, want %+v", file, name, i, got, want)
				}
			}
		}
	}
}

// A Scraper compiles its mapping once over many scrapes, reads each
// engine's exposition as the uncompiled path does, and follows a mapping
// changed between scrapes, in place or replaced.
func TestScraperCompilesItsMappingOnce(t *testing.T) {
	for _, tc := range engineExpositions() {
		t.Run(tc.file, func(t *testing.T) {
			text, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(text) }))
			defer srv.Close()
			fams := parseTestdata(t, tc.file)
			expect := func(m Mapping) Sample {
				s := NewSample(0)
				if err := m.add(fams, transport.URL(srv.URL), &s); err != nil {
					t.Fatal(err)
				}
				return s
			}
			sc := &Scraper{Targets: []string{srv.URL}, Mapping: tc.m, Client: srv.Client(), Sequential: true}
			scrape := func(i int) Sample {
				t.Helper()
				got, err := sc.Scrape(context.Background(), 0)
				if err != nil {
					t.Fatalf("scrape %d: %v", i, err)
				}
				return got
			}
			var first *rules
			want := expect(tc.m)
			for i := range 3 {
				if got := scrape(i); !reflect.DeepEqual(got, want) {
					t.Errorf("scrape %d: %+v, want %+v", i, got, want)
				}
				if i == 0 {
					first = sc.rules.last
				} else if sc.rules.last != first {
					t.Errorf("scrape %d compiled the mapping again", i)
				}
			}
			// A rule's scale changed in place is a new mapping.
			for i := range sc.Mapping {
				if sc.Mapping[i].Kind == Counter {
					sc.Mapping[i].Scale = 2
				}
			}
			if got, want := scrape(3), expect(sc.Mapping); !reflect.DeepEqual(got, want) {
				t.Errorf("after a scale changed in place: %+v, want %+v", got, want)
			}
			if sc.rules.last == first {
				t.Error("a mapping changed in place kept its old rules")
			}
			// A mapping replaced by one rule: only its family is read.
			sc.Mapping = Mapping{tc.m[0]}
			if got, want := scrape(4), expect(sc.Mapping); !reflect.DeepEqual(got, want) {
				t.Errorf("after the mapping was replaced: %+v, want %+v", got, want)
			}
		})
	}
}

// A mapping whose rule does not check fails every call the same way, cached
// or not.
func TestCompiledRulesKeepTheError(t *testing.T) {
	fams := parseTestdata(t, "vllm_metrics.txt")
	for _, bad := range []Rule{
		{Common: TTFT, Metric: "vllm:time_to_first_token_seconds", Kind: Histogram, Match: map[string]string{"model_name": "("}},
		{Common: TTFT, Metric: "vllm:time_to_first_token_seconds", Kind: Histogram, Scale: math.NaN()},
	} {
		m := append(VLLM(), bad)
		var cache ruleCache
		for i := range 2 {
			want, got := NewSample(0), NewSample(0)
			errWant, errGot := m.add(fams, "", &want), cache.get(m).apply(fams, "", &got)
			if errWant == nil || errGot == nil || errWant.Error() != errGot.Error() || !reflect.DeepEqual(want, got) {
				t.Errorf("call %d: error %v, want %v", i, errGot, errWant)
			}
		}
	}
}

// A Sequential scraper's scrapes, read one after another and waited for
// later, in any order, give the samples (and the process watch's
// warnings) that scrapes worked out at once give: each target's text is
// worked out after the one before it, whatever is waited for first.
func TestScrapeLaterGivesWhatScrapeGives(t *testing.T) {
	text, err := os.ReadFile("testdata/vllm_metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	// each answer moves the counters and a gauge; every third a process
	// "restarts" with lower counters, so the watch has something to see
	const scrapes = 12
	texts := make([][]byte, scrapes)
	for i := range texts {
		v := 50000 + 1000*i
		if i%3 == 2 {
			v = 100 * i
		}
		tx := strings.Replace(string(text), "vllm:generation_tokens_total{engine=\"0\",model_name=\"zai-org/GLM-4.6-FP8\"} 50000.0",
			fmt.Sprintf("vllm:generation_tokens_total{engine=\"0\",model_name=\"zai-org/GLM-4.6-FP8\"} %d", v), 1)
		tx = strings.Replace(tx, "vllm:num_requests_running{engine=\"0\",model_name=\"zai-org/GLM-4.6-FP8\"} 7.0",
			fmt.Sprintf("vllm:num_requests_running{engine=\"0\",model_name=\"zai-org/GLM-4.6-FP8\"} %d", i%4), 1)
		texts[i] = []byte(tx)
	}
	serve := func() (*httptest.Server, *atomic.Int64) {
		var n atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write(texts[int(n.Add(1)-1)%scrapes])
		}))
		return srv, &n
	}
	srvA, _ := serve()
	defer srvA.Close()
	srvB, _ := serve()
	defer srvB.Close()
	now := &Scraper{Targets: []string{srvA.URL}, Mapping: VLLM(), Client: srvA.Client()}
	later := &Scraper{Targets: []string{srvB.URL}, Mapping: VLLM(), Client: srvB.Client(), Sequential: true}
	var want []Sample
	pending := make([]*Pending, scrapes)
	for i := range scrapes {
		at := time.Duration(i) * time.Second
		s, err := now.Scrape(context.Background(), at)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, s)
		pending[i] = later.ScrapeLater(context.Background(), at)
	}
	for i := scrapes - 1; i >= 0; i-- {
		got, err := pending[i].Wait()
		if err != nil {
			t.Fatal(err)
		}
		// the parts are keyed by target URL: compare them under one name
		got = renameTarget(got, transport.URL(srvB.URL), transport.URL(srvA.URL))
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("scrape %d: %+v, want %+v", i, got, want[i])
		}
	}
	wantW, gotW := now.Warnings(), later.Warnings()
	for i := range gotW {
		gotW[i] = strings.ReplaceAll(gotW[i], transport.URL(srvB.URL), transport.URL(srvA.URL))
	}
	if len(wantW) == 0 || !reflect.DeepEqual(gotW, wantW) {
		t.Errorf("warnings %q, want %q", gotW, wantW)
	}
}

func renameTarget(s Sample, from, to string) Sample {
	parts := map[string]Part{}
	for k, p := range s.Parts {
		parts[strings.Replace(k, from, to, 1)] = p
	}
	s.Parts = parts
	return s
}
