package signal

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// fakeProcess is one engine process's exposition: its start time (0 for
// none), an optional pod label on its series, and its request count.
type fakeProcess struct {
	start float64
	pod   string
	n     float64
}

func (p fakeProcess) exposition() string {
	var b strings.Builder
	if p.start > 0 {
		fmt.Fprintf(&b, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %g\n", p.start)
	}
	labels := `engine="0",finished_reason="stop"`
	if p.pod != "" {
		labels += fmt.Sprintf(",pod=%q", p.pod)
	}
	fmt.Fprintf(&b, "# TYPE vllm:request_success_total counter\nvllm:request_success_total{%s} %g\n", labels, p.n)
	return b.String()
}

func TestProcessWatch(t *testing.T) {
	const t0 = 1.7e9
	cases := []struct {
		name    string // what the case shows
		answers []fakeProcess
		want    string // a substring of the warning; "" for none
	}{
		// one process, growing: nothing to say
		{"one process", []fakeProcess{{t0, "", 10}, {t0, "", 20}, {t0, "", 30}, {t0, "", 40}}, ""},
		// a restart: a later start time once, counters from zero, climbing slowly
		{"a restart", []fakeProcess{{t0, "", 100}, {t0 + 60, "", 1}, {t0 + 60, "", 20}, {t0 + 60, "", 150}}, ""},
		// two processes behind one URL, told apart by their start times
		{"alternating start times", []fakeProcess{{t0, "", 100}, {t0 + 5, "", 3}, {t0, "", 101}}, "back to 1700000000, seen before"},
		// the second answer started before the first: not a restart
		{"an earlier start", []fakeProcess{{t0 + 5, "", 3}, {t0, "", 100}}, "a process that started earlier"},
		// no start time, but a pod label that comes back
		{"alternating pod label", []fakeProcess{{0, "vllm-a", 100}, {0, "vllm-b", 3}, {0, "vllm-a", 101}}, `label pod went from "vllm-b" back to "vllm-a"`},
		// no clue but the counters: down and straight back up, twice
		{"bouncing counters", []fakeProcess{{0, "", 100}, {0, "", 3}, {0, "", 101}, {0, "", 4}, {0, "", 102}}, "went down and straight back up 2 times"},
		// a genuine restart, then a second one much later: each climbs back slowly
		{"two restarts", []fakeProcess{{0, "", 100}, {0, "", 3}, {0, "", 50}, {0, "", 120}, {0, "", 2}, {0, "", 60}, {0, "", 130}}, ""},
	}
	for _, c := range cases {
		var w processWatch
		var got []string
		for k, a := range c.answers {
			p := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := p.TextToMetricFamilies(strings.NewReader(a.exposition()))
			if err != nil {
				t.Fatal(err)
			}
			if msg := w.observe("http://svc/metrics", "http://svc/metrics", uint64(k+1), fams, a.n); msg != "" {
				got = append(got, msg)
			}
		}
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: warned %q", c.name, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s: warnings %q, want one holding %q", c.name, got, c.want)
		}
	}
}

// TestScraperNamesALoadBalancedURL scrapes a loopback "Service" that sends
// each request to one of two fake engine processes in turn, as a Service URL
// does across pods, and checks the scraper names the URL and what to use.
func TestScraperNamesALoadBalancedURL(t *testing.T) {
	pods := []fakeProcess{{1.7e9 + 100, "", 500}, {1.7e9 + 250, "", 20}}
	var mu sync.Mutex
	next := 0
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		p := &pods[next%len(pods)]
		next++
		p.n++
		text := p.exposition()
		mu.Unlock()
		fmt.Fprint(w, text)
	}))
	defer svc.Close()
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, fakeProcess{1.7e9, "", 7}.exposition())
	}))
	defer pod.Close()
	sc := &Scraper{Targets: []string{svc.URL + "/metrics", pod.URL + "/metrics"}, Mapping: VLLM()}
	var totals []float64
	for i := range 4 {
		s, err := sc.Scrape(context.Background(), time.Duration(i)*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		totals = append(totals, s.Counter[RequestsOK])
	}
	warns := sc.Warnings()
	t.Logf("requests_ok per scrape through the Service and one pod: %v", totals)
	if len(warns) != 1 || !strings.Contains(warns[0], svc.URL+"/metrics") || strings.Contains(warns[0], pod.URL) ||
		!strings.Contains(warns[0], "recipe.discovery.kubernetes") || !strings.Contains(warns[0], "recipe.prometheus") {
		t.Errorf("warnings %q: want one naming %s and what to use instead", warns, svc.URL)
	}
}

// TestOverlappingScrapesOfOneProcess: the scrape loop and an idle wait can
// scrape one engine at once; a scrape sent earlier but answered later read
// lower counters. Taken in answer order that looked like counters going
// down and straight back up, twice: the default run warned of a load
// balancer in front of the one simulator. In send order there is none.
func TestOverlappingScrapesOfOneProcess(t *testing.T) {
	var w processWatch
	fams := map[string]*dto.MetricFamily{}
	for _, s := range []struct {
		seq   uint64
		total float64
	}{{1, 100}, {3, 110}, {2, 105}, {4, 112}, {6, 120}, {5, 115}, {7, 121}} {
		if msg := w.observe("http://engine/metrics", "http://engine/metrics", s.seq, fams, s.total); msg != "" {
			t.Fatalf("one process scraped by overlapping requests: %s", msg)
		}
	}
}
