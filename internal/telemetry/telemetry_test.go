package telemetry

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return fams
}

// value finds the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range f.Metric {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		}
	}
	return 0, false
}

func TestScrapeFollowsTheRun(t *testing.T) {
	tel := New("recipe-1", "v0.1.0")
	srv := httptest.NewServer(tel.Handler())
	defer srv.Close()

	// Before the sweep: step -1, P90s NaN.
	fams := scrape(t, srv.URL)
	if v, _ := value(t, fams, "headroom_step", nil); v != -1 {
		t.Errorf("headroom_step before the sweep = %g, want -1", v)
	}
	if v, _ := value(t, fams, "headroom_ttft_p90_seconds", nil); !math.IsNaN(v) {
		t.Errorf("P90 TTFT before data = %g, want NaN", v)
	}

	tel.SetPhase("sweep")
	tel.SetStep(2, 15)
	for range 5 {
		tel.RequestStarted()
	}
	tel.RequestDone("")
	tel.RequestDone("timeout")
	tel.RequestDone("refusal")
	tel.ObserveRunning(4.2, 11.5, 0.01)
	tel.ObserveStep(10, "pass")
	tel.ObserveStep(15, "too_close")
	tel.ObserveStep(15, "fail") // the repeat replaces the earlier verdict

	fams = scrape(t, srv.URL)
	cases := []struct {
		name   string
		labels map[string]string
		want   float64
		absent bool
	}{
		// The phase the run is in is 1, others 0.
		{"headroom_phase", map[string]string{"phase": "sweep"}, 1, false},
		{"headroom_phase", map[string]string{"phase": "pre-flight"}, 0, false},
		// Step and sessions.
		{"headroom_step", nil, 2, false},
		{"headroom_sessions", nil, 15, false},
		// Requests: 5 sent, 3 done, 2 failed by class.
		{"headroom_requests_sent_total", nil, 5, false},
		{"headroom_requests_in_flight", nil, 2, false},
		{"headroom_requests_failed_total", map[string]string{"class": "timeout"}, 1, false},
		// Running P90s.
		{"headroom_ttft_p90_seconds", nil, 4.2, false},
		{"headroom_interactivity_p90_tokens_per_second", nil, 11.5, false},
		// Verdicts: the repeat at 15 replaced "too_close".
		{"headroom_step_verdict", map[string]string{"sessions": "10", "verdict": "pass"}, 1, false},
		{"headroom_step_verdict", map[string]string{"sessions": "15", "verdict": "fail"}, 1, false},
		{"headroom_step_verdict", map[string]string{"sessions": "15", "verdict": "too_close"}, 0, true},
		{"headroom_steps_total", map[string]string{"verdict": "too_close"}, 1, false},
		// Every verdict is counted from 0, spelled as rig passes them.
		{"headroom_steps_total", map[string]string{"verdict": "no_data"}, 0, false},
		// Info names the recipe and version.
		{"headroom_run_info", map[string]string{"recipe": "recipe-1", "version": "v0.1.0"}, 1, false},
	}
	for _, c := range cases {
		got, ok := value(t, fams, c.name, c.labels)
		if ok == c.absent || (!c.absent && got != c.want) {
			t.Errorf("%s%v = %g (present %v), want %g (present %v)", c.name, c.labels, got, ok, c.want, !c.absent)
		}
	}
}

func TestNilTelemetryRecordsNothing(t *testing.T) {
	var tel *Telemetry
	// None of these may panic on a run without metrics.
	tel.SetPhase("sweep")
	tel.SetStep(1, 5)
	tel.RequestStarted()
	tel.RequestDone("server")
	tel.ObserveRunning(1, 2, 0)
	tel.ObserveStep(5, "pass")
	tel.RollbackFailed()
	if tel != nil {
		t.Fatal("unreachable")
	}
}

func TestServeOnLoopback(t *testing.T) {
	tel := New("r", "dev")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := tel.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tel.SetPhase("rollback")
	tel.RollbackFailed()
	fams := scrape(t, "http://"+addr.String()+"/metrics")
	if v, _ := value(t, fams, "headroom_rollback_failed", nil); v != 1 {
		t.Errorf("headroom_rollback_failed = %g, want 1", v)
	}
	if v, _ := value(t, fams, "headroom_phase", map[string]string{"phase": "rollback"}); v != 1 {
		t.Errorf("rollback phase = %g, want 1", v)
	}
	// A second registry is independent: nothing is global.
	other := New("other", "dev")
	rec := httptest.NewRecorder()
	other.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	ofams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := value(t, ofams, "headroom_rollback_failed", nil); v != 0 {
		t.Errorf("a second Telemetry sees the first one's rollback failure (%g)", v)
	}
}
