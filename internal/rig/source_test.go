package rig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// fakeEngine serves a vLLM-style /metrics with a process start time and n
// finished requests; n counts up on every scrape.
func fakeEngine(start float64, n *int, mu *sync.Mutex) string {
	mu.Lock()
	defer mu.Unlock()
	*n++
	return fmt.Sprintf("# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %g\n"+
		"# TYPE vllm:request_success_total counter\nvllm:request_success_total{engine=\"0\",finished_reason=\"stop\"} %d\n"+
		"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 0\n", start, *n)
}

// TestPreflightNamesALoadBalancedURL: a fixed metrics URL that is a
// "Service" in front of two engine processes, balancing each new connection
// between them, is named by pre-flight's check, and the warning reaches the
// run's summary.
func TestPreflightNamesALoadBalancedURL(t *testing.T) {
	var mu sync.Mutex
	na, nb, conns := 1000, 3, 0
	svc := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// the connection picks the process, as kube-proxy does
		if r.Context().Value(connKey{}).(int)%2 == 0 {
			fmt.Fprint(w, fakeEngine(1.7e9+10, &na, &mu))
		} else {
			fmt.Fprint(w, fakeEngine(1.7e9+90, &nb, &mu))
		}
	}))
	svc.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		mu.Lock()
		defer mu.Unlock()
		conns++
		return context.WithValue(ctx, connKey{}, conns)
	}
	svc.Start()
	defer svc.Close()
	cfg := config.Default()
	var acc access
	src, err := newSource(cfg, []string{svc.URL + "/metrics"}, signal.VLLM(), acc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Kept-alive, the sweep's scrapes would all reach one process.
	for i := range 3 {
		if _, err := src.Scrape(context.Background(), time.Duration(i)*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if w := src.Warnings(); len(w) != 0 {
		t.Fatalf("warned before the check: %q", w)
	}
	notes, err := src.check(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(notes, "\n")
	if !strings.Contains(joined, "metrics from 1 fixed /metrics URL") || !strings.Contains(joined, svc.URL+"/metrics answers from different processes") {
		t.Errorf("pre-flight notes %q: want the source and the load-balanced URL named", notes)
	}
	sum := Summarize(cfg, sweep.Result{Warnings: src.Warnings()})
	if len(sum.Warnings) != 1 || !strings.Contains(sum.Warnings[0], svc.URL) || !strings.Contains(sum.Warnings[0], "recipe.discovery.kubernetes") {
		t.Errorf("summary warnings %q: want the load-balanced URL and what to use instead", sum.Warnings)
	}
	t.Logf("%d connections for 3 kept-alive scrapes and %d probes; warning: %s", conns, probeScrapes, sum.Warnings)
}

type connKey struct{}

// TestSourceFromDiscovery builds the source of a recipe that discovers its
// pods, on a client-go fake whose EndpointSlices point at two loopback
// engines, and reads both.
func TestSourceFromDiscovery(t *testing.T) {
	var mu sync.Mutex
	var ports []int32
	for _, n := range []int{100, 20} {
		n := n
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, fakeEngine(1.7e9, &n, &mu))
		}))
		defer srv.Close()
		u, _ := url.Parse(srv.URL)
		p, _ := strconv.Atoi(u.Port())
		ports = append(ports, int32(p))
	}
	name, yes := "metrics", new(true)
	client := fake.NewClientset()
	for i, p := range ports {
		_, err := client.DiscoveryV1().EndpointSlices("llm").Create(context.Background(), &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("vllm-%d", i), Namespace: "llm", Labels: map[string]string{discoveryv1.LabelServiceName: "vllm"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &p}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: yes}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	cfg.Recipe.Dir = "/recipes"
	cfg.Recipe.Discovery = &recipe.DiscoverySpec{Kubernetes: &recipe.KubernetesDiscovery{Service: "vllm", Port: "metrics", Kubeconfig: "kube.yaml"}}
	var asked []string
	kube := func(kubeconfig, kubeContext string) (kubernetes.Interface, string, error) {
		asked = append(asked, kubeconfig)
		return client, "llm", nil
	}
	var acc access
	src, err := newSource(cfg, nil, signal.VLLM(), acc, nil, kube)
	if err != nil {
		t.Fatal(err)
	}
	s, err := src.Scrape(context.Background(), 0)
	if err != nil || len(s.Parts) != 2 || s.Counter[signal.RequestsOK] != 101+21 {
		t.Errorf("scrape of the discovered pods: %v, %d parts, requests_ok %g; want 2 parts and 122", err, len(s.Parts), s.Counter[signal.RequestsOK])
	}
	fams, err := src.families(context.Background(), 0)
	if err != nil || len(fams) != 2 || src.engine(context.Background(), fams, 0) != "vllm" {
		t.Errorf("families of the discovered pods: %d, %v", len(fams), err)
	}
	notes, err := src.check(context.Background(), 0)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "the pods of service vllm in namespace llm, port metrics, /metrics") {
		t.Errorf("check: %q, %v", notes, err)
	}
	if len(asked) != 1 || asked[0] != filepath.Join("/recipes", "kube.yaml") {
		t.Errorf("kubeconfig asked for %q, want the recipe's, relative to its folder", asked)
	}
	if _, err := newSource(config.Run{}, nil, signal.VLLM(), acc, nil, kube); err == nil {
		t.Error("a recipe with no metrics source built one")
	}
	failing := func(string, string) (kubernetes.Interface, string, error) {
		return nil, "", errors.New("no kubeconfig")
	}
	if _, err := newSource(cfg, nil, signal.VLLM(), acc, nil, failing); err == nil || !strings.Contains(err.Error(), "recipe.discovery.kubernetes") {
		t.Errorf("a failing connection: %v", err)
	}
}

// startPrometheus starts Debian's prometheus binary scraping targets
// (host:port) every second under job "vllm", and returns its URL once ready;
// the test skips when the binary is absent.
func startPrometheus(t *testing.T, ctx context.Context, targets ...string) string {
	t.Helper()
	bin := "/usr/bin/prometheus"
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("prometheus"); err != nil {
			t.Skip("prometheus binary not found (/usr/bin/prometheus or on PATH): apt-get install -y prometheus to run this test")
		}
	}
	if testing.Short() {
		t.Skip("starts a Prometheus server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	conf := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: [%s]\n", strings.Join(quoted, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(pctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+addr, "--log.level=warn")
	var logs strings.Builder
	var logMu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&logs, &logMu}, lockedWriter{&logs, &logMu}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	until(t, ctx, "Prometheus to be ready", func() bool {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return "http://" + addr
}

type lockedWriter struct {
	b  *strings.Builder
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// until polls cond every 100ms until it holds or ctx ends.
func until(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestPrometheusBesidesTargets reads engine a through a real Prometheus
// and engine b by scraping it: the source sums both once, tells the engine
// through Prometheus, and refuses a target that Prometheus holds too.
func TestPrometheusBesidesTargets(t *testing.T) {
	t.Parallel() // wall-clock waits, beside the other Prometheus test
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	na, nb := 500, 40
	serve := func(n *int) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			text := fmt.Sprintf("# TYPE vllm:request_success_total counter\nvllm:request_success_total{engine=\"0\",finished_reason=\"stop\"} %d\n"+
				"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 1\n", *n)
			mu.Unlock()
			fmt.Fprint(w, text)
		}))
	}
	a, b := serve(&na), serve(&nb)
	defer a.Close()
	defer b.Close()
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	promURL := startPrometheus(t, ctx, host(a))
	clock, _ := timescale.New(1)
	cfg := config.Default()
	cfg.Recipe.Prometheus = &recipe.PrometheusSpec{URL: promURL, Selector: `{job="vllm"}`}
	var acc access
	src, err := newSource(cfg, []string{b.URL + "/metrics"}, signal.VLLM(), acc, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	var s signal.Sample
	until(t, ctx, "Prometheus to scrape engine a", func() bool {
		s, err = src.Scrape(ctx, clock.Now())
		return err == nil && len(s.Errors) == 0 && s.Counter[signal.RequestsOK] == 540
	})
	if len(s.Parts) != 2 || s.Gauge[signal.Running] != 2 {
		t.Errorf("merged sample: %d parts, running %g; want 2 parts and 2 running", len(s.Parts), s.Gauge[signal.Running])
	}
	fams, err := src.families(ctx, clock.Now())
	if err != nil || len(fams) != 2 {
		t.Fatalf("families: %d, %v", len(fams), err)
	}
	notes, err := src.check(ctx, clock.Now())
	if err != nil || !strings.Contains(strings.Join(notes, " "), `metrics from 1 fixed /metrics URL and Prometheus at `+promURL+` under {job="vllm"}`) {
		t.Errorf("check: %q, %v", notes, err)
	}
	// With the SGLang mapping no family is read, but Prometheus still says
	// the engine is vLLM from its series' names.
	sg, err := newSource(cfg, nil, signal.SGLang(), acc, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	if eng := sg.engine(ctx, nil, clock.Now()); eng != "vllm" {
		t.Errorf("engine through Prometheus: %q, want vllm", eng)
	}
	// Engine a scraped as well as read through Prometheus: counted twice.
	twice, err := newSource(cfg, []string{a.URL + "/metrics", b.URL + "/metrics"}, signal.VLLM(), acc, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = twice.check(ctx, clock.Now())
	if err == nil || !strings.Contains(err.Error(), a.URL+"/metrics") || !strings.Contains(err.Error(), "counted twice") || strings.Contains(err.Error(), b.URL) {
		t.Errorf("overlap: %v; want engine a named as counted twice", err)
	}
}

// TestSweepThroughPrometheus runs a short wall-clock sweep whose metrics
// come only from a real Prometheus scraping the simulator: pre-flight
// passes through Prometheus and the step is judged on its windows.
func TestSweepThroughPrometheus(t *testing.T) {
	t.Parallel() // wall-clock waits, beside the other Prometheus test
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := sim.New(sim.Options{Profile: sim.DefaultProfile(), Scale: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	promURL := startPrometheus(t, ctx, strings.TrimPrefix(endpoint, "http://"))
	cfg := config.Default()
	cfg.Recipe.Endpoint, cfg.Recipe.Metrics, cfg.TimeScale = endpoint, nil, 1
	cfg.Recipe.Prometheus = &recipe.PrometheusSpec{URL: promURL, Selector: `{job="vllm"}`}
	cfg.Workload.SynthSessions, cfg.Workload.ThinkTime = 8, "none"
	cfg.Workload.Mix = config.Mix{Light: 1} // short prompts: the engine is idle again sooner after the step
	cfg.Evals.Suites = nil
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{2}, 0, 0
	cfg.Sweep.WarmupS, cfg.Sweep.StepS, cfg.Sweep.WindowS, cfg.Sweep.ScrapeS, cfg.Sweep.DrainS = 10, 12, 4, 1, 30
	cfg.Sweep.MaxStepS = cfg.Sweep.StepS // a short step: not extended to the default step's 2x
	cfg.Workload.PrimeTimeoutS = 10      // room for a loaded machine
	cfg.Output = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// The simulator's HTTP counters, as client_golang's, have no family
	// until a first request; a serving engine has had one, and Prometheus
	// has scraped it since, before pre-flight asks.
	resp, err := http.Get(endpoint + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	clock, _ := timescale.New(1)
	var acc access
	src, _ := newSource(cfg, nil, signal.VLLM(), acc, clock, nil)
	until(t, ctx, "Prometheus to scrape the simulator", func() bool {
		s, err := src.Scrape(ctx, clock.Now())
		_, ok := s.Counter[signal.HTTP5xx]
		return err == nil && ok
	})
	var progress strings.Builder
	sum, err := Run(ctx, Options{Config: cfg, Progress: &progress})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	if len(sum.Phases) == 0 || !strings.Contains(sum.Phases[0].Detail, "metrics from Prometheus at "+promURL) {
		t.Errorf("pre-flight detail does not say where the metrics come from: %+v", sum.Phases)
	}
	if len(sum.Steps) != 1 {
		t.Fatalf("%d steps, want 1", len(sum.Steps))
	}
	st := sum.Steps[0]
	if v := st.Verdict; v != verdict.Pass && v != verdict.TooClose {
		t.Errorf("2 sessions on the default profile through Prometheus read %s: %+v", v, st)
	}
	if st.Windows == 0 || st.Tokens.Output == 0 {
		t.Errorf("step judged on %d windows with %g output tokens through Prometheus", st.Windows, st.Tokens.Output)
	}
	t.Logf("step through Prometheus: %s on %d windows, TTFT P90 %.3g [%.3g, %.3g] s, %g output tokens, missing %v, warnings %q",
		st.Verdict, st.Windows, st.TTFTP90.Center, st.TTFTP90.Lo, st.TTFTP90.Hi, st.Tokens.Output, st.Missing, st.Warnings)
}
