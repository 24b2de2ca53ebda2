package rig

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// scaleExposition multiplies every sample of the counter and histogram
// families of a text exposition by f.
func scaleExposition(text []byte, f float64) []byte {
	var out bytes.Buffer
	scaled := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) == 4 && fields[0] == "#" && fields[1] == "TYPE" && (fields[3] == "counter" || fields[3] == "histogram") {
			scaled[fields[2]] = true
		}
		if line != "" && line[0] != '#' {
			name := line[:strings.IndexAny(line, "{ ")]
			base := name
			for _, suffix := range []string{"_bucket", "_count", "_sum", "_total"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if sp := strings.LastIndexByte(line, ' '); (scaled[name] || scaled[base]) && sp > 0 {
				if v, err := strconv.ParseFloat(line[sp+1:], 64); err == nil {
					line = line[:sp+1] + strconv.FormatFloat(v*f, 'g', -1, 64)
				}
			}
		}
		out.WriteString(line + "\n")
	}
	return out.Bytes()
}

// proxied is a run of one step of 2 sessions against the simulator on a
// scaled wall clock, its /metrics read through a real loopback proxy that
// calls change on every answer once the run is 30 s (modelled) into its
// judged time (a zero from before).
type proxied struct {
	cfg      config.Run
	progress io.Writer
	changed  atomic.Int64 // answers changed
}

func newProxied(t *testing.T, change func(w http.ResponseWriter, status int, contentType string, body []byte) bool) *proxied {
	t.Helper()
	const scale = wallScale
	s, err := sim.New(sim.Options{Profile: sim.DefaultProfile(), Scale: scale, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := &proxied{}
	var from atomic.Int64 // wall time (UnixNano) from which answers change; 0: not yet known
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(url + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if at := from.Load(); at > 0 && time.Now().UnixNano() >= at && change(w, resp.StatusCode, resp.Header.Get("Content-Type"), body) {
			p.changed.Add(1)
			return
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
	}))
	t.Cleanup(proxy.Close)

	cfg := config.Default()
	cfg.Recipe.Endpoint, cfg.Recipe.Metrics, cfg.TimeScale = url, []string{proxy.URL + "/metrics"}, config.Scale(scale)
	cfg.Workload.SynthSessions = 8
	cfg.Evals.Suites, cfg.Evals.UnderLoadShare = nil, 0
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{2}, 2, 0
	cfg.Sweep.WarmupS, cfg.Sweep.StepS, cfg.Workload.PrimeTimeoutS = 240, 240, 240
	f := false
	cfg.Sweep.Repeat = &f
	cfg.Output = t.TempDir()
	// not validated: the run file refuses a scaled clock against an
	// endpoint, which a real server would be; this one runs at the same
	// scale as the run
	p.cfg = cfg
	// The run's clock is the wall clock at x scale from its start: the
	// line that says when the judged time starts tells when to change.
	started := time.Now()
	warmup := regexp.MustCompile(`step 1: 2 sessions, warm-up until (\S+),`)
	var mu sync.Mutex
	var lines bytes.Buffer
	p.progress = writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		lines.Write(b)
		if m := warmup.FindSubmatch(lines.Bytes()); m != nil && from.Load() == 0 {
			if d, err := time.ParseDuration(string(m[1])); err == nil {
				from.Store(started.Add((d + 30*time.Second) / scale).UnixNano())
			}
		}
		return len(b), nil
	})
	return p
}

// A /metrics proxy that multiplies every counter and histogram by 0.3 from
// 30 s into the judged time: the step must not pass, and its warnings must
// name the series that shrank.
func TestShrinkingCountersThroughAProxyDoNotPass(t *testing.T) {
	p := newProxied(t, func(w http.ResponseWriter, status int, contentType string, body []byte) bool {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.Write(scaleExposition(body, 0.3))
		return true
	})
	sum, err := Run(context.Background(), Options{Config: p.cfg, Progress: p.progress})
	t.Logf("scaled scrapes %d; error %v", p.changed.Load(), err)
	if p.changed.Load() == 0 {
		t.Fatal("the proxy never scaled a scrape")
	}
	if len(sum.Steps) != 1 {
		t.Fatalf("%d steps, want 1", len(sum.Steps))
	}
	st := sum.Steps[0]
	t.Logf("step: %s, parts %v", st.Verdict, stepParts(sum))
	if st.Verdict == verdict.Pass || partVerdict(st, verdict.PartTTFT) == verdict.Pass {
		t.Errorf("a step whose counters shrank read %s (ttft %s): want no pass", st.Verdict, partVerdict(st, verdict.PartTTFT))
	}
	all := strings.Join(st.Warnings, "\n")
	if !strings.Contains(all, "ttft_seconds") || !(strings.Contains(all, "shrank with no restart") || strings.Contains(all, "a fraction of a count")) {
		t.Errorf("no warning names the shrunk TTFT series:\n%s", all)
	}
	if code := ExitCodeOf(sum, err); code == ExitHeld {
		t.Errorf("exit code %d for a target whose counters shrank", code)
	}
}

// A /metrics that answers 404 from 30 s into the judged time: the sweep
// stops, the step reads no data, and the run exits 3 naming the metrics
// URL and its answer.
func TestMetricsThatVanishExitNoData(t *testing.T) {
	p := newProxied(t, func(w http.ResponseWriter, _ int, _ string, _ []byte) bool {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return true
	})
	sum, err := Run(context.Background(), Options{Config: p.cfg, Progress: p.progress})
	t.Logf("404 answers %d; error %v", p.changed.Load(), err)
	if p.changed.Load() == 0 {
		t.Fatal("the proxy never answered 404")
	}
	if len(sum.Steps) != 1 || sum.Steps[0].Verdict != verdict.NoData {
		t.Fatalf("steps %v, want the one step no data", stepParts(sum))
	}
	if code := ExitCodeOf(sum, err); code != ExitUnsure {
		t.Errorf("exit code %d, want %d (no data)", code, ExitUnsure)
	}
	if err == nil || !strings.Contains(err.Error(), p.cfg.Recipe.Metrics[0]) || !strings.Contains(err.Error(), "404") {
		t.Errorf("error %v names neither the metrics URL nor its answer", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// running/waiting gauges that read NaN from 30 s into the judged time on:
// post-flight cannot check idleness, which is a failed phase and exit 1,
// not a server without the gauges.
func TestNaNGaugesFailPostFlight(t *testing.T) {
	gauge := regexp.MustCompile(`(?m)^(vllm:num_requests_(running|waiting)(\{[^}]*\})?) \S+$`)
	p := newProxied(t, func(w http.ResponseWriter, status int, contentType string, body []byte) bool {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.Write(gauge.ReplaceAll(body, []byte("$1 NaN")))
		return true
	})
	sum, err := Run(context.Background(), Options{Config: p.cfg, Progress: p.progress})
	t.Logf("NaN answers %d; error %v", p.changed.Load(), err)
	if p.changed.Load() == 0 {
		t.Fatal("the proxy never wrote NaN")
	}
	var pf string
	for _, ph := range sum.Phases {
		if ph.Name == PhasePostflight {
			pf = ph.Status + ": " + ph.Detail
		}
	}
	if !strings.HasPrefix(pf, "failed") || !strings.Contains(pf, "NaN") {
		t.Errorf("post-flight %q: want failed, naming NaN", pf)
	}
	if code := ExitCodeOf(sum, err); code != ExitRigError {
		t.Errorf("exit code %d, want %d", code, ExitRigError)
	}
}
