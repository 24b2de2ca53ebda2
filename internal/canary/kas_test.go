package canary_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwtyped "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/typed/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/headroom-bench/headroom/internal/canary"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/trace"
	"github.com/headroom-bench/headroom/internal/transport"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// kasScript starts a real kube-apiserver (built once per machine by
// `.ci/kube-apiserver.sh build`) over etcd on loopback.
const kasScript = "../../.ci/kube-apiserver.sh"

// kasStart is the shared script kasScript runs to start the server.
const kasStart = "../../../shared/servers/kube-apiserver/start.sh"

// realAPIServer starts a kube-apiserver for one test and stops it (the
// processes the script started, by their pids) at the test's end. It skips,
// saying why, when the server is not built or etcd is missing, except that
// a missing server fails under HEADROOM_REQUIRE_SHARED=1 unless
// $HEADROOM_KAS_UNAVAILABLE says why it could not be built (as
// internal/deploy's tests do).
func realAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("real kube-apiserver tests skipped in -short mode")
	}
	out, err := exec.Command("bash", kasScript, "path").Output()
	bin := strings.TrimSpace(string(out))
	if _, serr := os.Stat(bin); err != nil || serr != nil {
		why := fmt.Sprintf("kube-apiserver not built at %q, so the HTTPRoute split was not tried on a real API server: bash .ci/kube-apiserver.sh build (5-20 minutes once per machine)", bin)
		if u := os.Getenv("HEADROOM_KAS_UNAVAILABLE"); u != "" {
			t.Skip(why + " (" + u + ")")
		}
		if os.Getenv("HEADROOM_REQUIRE_SHARED") == "1" {
			t.Fatal(why + " (HEADROOM_REQUIRE_SHARED=1)")
		}
		t.Skip(why)
	}
	// the binary is cached per machine, but the script that starts it is
	// in ../shared beside the clone, which a clone alone does not have
	if _, err := os.Stat(kasStart); err != nil {
		why := fmt.Sprintf("%s not found (no ../shared beside the clone), so the HTTPRoute split was not tried on a real API server", kasStart)
		if os.Getenv("HEADROOM_REQUIRE_SHARED") == "1" {
			t.Fatal(why + " (HEADROOM_REQUIRE_SHARED=1)")
		}
		t.Skip(why)
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("etcd not found, so the HTTPRoute split was not tried on a real API server: apt-get install etcd-server")
	}
	dir := t.TempDir()
	// a hang guard, not a timing: start.sh waits for /readyz itself
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	msg, err := exec.CommandContext(ctx, "bash", kasScript, "start", dir).CombinedOutput()
	t.Cleanup(func() {
		for _, f := range []string{"apiserver.pid", "etcd.pid"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				continue
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
					_, _ = p.Wait()
				}
			}
		}
	})
	if err != nil {
		t.Fatalf("kube-apiserver.sh start: %v\n%s", err, msg)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, func() error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) != "ok" {
			err = fmt.Errorf("readyz: %s", body)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// poll calls f every 100 ms until it returns nil or ctx ends.
func poll(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// installHTTPRouteCRD installs the HTTPRoute CRD the gateway-api module
// ships (from the module cache, never downloaded here): the experimental
// channel's, since HTTPRouteRule.sessionPersistence is experimental in
// v1.6 and the standard channel's CRD prunes it.
func installHTTPRouteCRD(t *testing.T, ctx context.Context, cfg *rest.Config) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/gateway-api: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental", "gateway.networking.k8s.io_httproutes.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the HTTPRoute CRD from the module cache: %v", err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the HTTPRoute CRD: %v", err)
	}
	if err := poll(ctx, func() error {
		got, err := crds.Get(ctx, "httproutes.gateway.networking.k8s.io", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return errors.New("the HTTPRoute CRD is not established yet")
	}); err != nil {
		t.Fatal(err)
	}
	// the typed client needs the resource served, not only established
	gw, err := gwclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, func() error {
		_, err := gw.GatewayV1().HTTPRoutes("default").List(ctx, metav1.ListOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// gatewayStandIn stands in for a gateway's data plane, which this test
// has none of: it routes by the weights of the HTTPRoute on the API
// server, read again when its copy is a modelled second old (as a gateway
// applies a route change after its own delay), and keeps every session on
// the backend it began on, as a rule with session persistence does. The
// stickiness and counts are the canary's own router's (by X-Session-Id
// when a request carries it, else by its leading messages: the load
// generator sends no session header); a candidate weight dropping to 0
// moves the candidate's sessions to the baseline too, as that router's
// rollback does (the HTTPRoute API does not say what a gateway does with
// them).
type gatewayStandIn struct {
	clock  *timescale.Clock
	routes gwtyped.HTTPRouteInterface
	router *canary.Router

	mu     sync.Mutex
	read   time.Duration
	last   string // weights last applied, baseline/candidate
	seen   []string
	readOK bool
	err    error
}

func (g *gatewayStandIn) refresh(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	if g.readOK && now-g.read < time.Second {
		return
	}
	rt, err := g.routes.Get(ctx, "chat", metav1.GetOptions{})
	if err != nil {
		g.err = err
		return
	}
	g.read, g.readOK = now, true
	b, c := weightsOf(rt)
	w := fmt.Sprintf("%d/%d", b, c)
	if w == g.last {
		return
	}
	wasCandidate := g.last != "" && !strings.HasSuffix(g.last, "/0")
	g.last = w
	g.seen = append(g.seen, w)
	switch {
	case c == 0 && wasCandidate:
		g.router.Rollback()
	case b+c > 0:
		g.router.SetShare(float64(c) / float64(b+c))
	}
}

func (g *gatewayStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.refresh(r.Context())
	g.router.ServeHTTP(w, r)
}

// weightsOf reads the route's rule 0 weights of vllm-today and vllm-cand
// (unset reads 1).
func weightsOf(rt *gwv1.HTTPRoute) (base, cand int32) {
	for _, ref := range rt.Spec.Rules[0].BackendRefs {
		w := int32(1)
		if ref.Weight != nil {
			w = *ref.Weight
		}
		switch ref.Name {
		case "vllm-today":
			base = w
		case "vllm-cand":
			cand = w
		}
	}
	return base, cand
}

func weightString(rt *gwv1.HTTPRoute) string {
	var w canary.Weights
	for _, ref := range rt.Spec.Rules[0].BackendRefs {
		switch ref.Name {
		case "vllm-today":
			w.Baseline = ref.Weight
		case "vllm-cand":
			w.Candidate = ref.Weight
		}
	}
	return w.String()
}

// shareWeights is the weights a share is set as, baseline/candidate.
func shareWeights(share float64) string {
	c := int(math.Round(share * canary.WeightTotal))
	return fmt.Sprintf("%d/%d", canary.WeightTotal-c, c)
}

// synthSessions is n agent-like sessions of turns calls each: a prompt
// that grows by 256 tokens a turn over the session's own prefix, 48
// tokens answered.
func synthSessions(n, turns int) []load.Session {
	out := make([]load.Session, n)
	for i := range out {
		ids := make([]int64, 0, turns*4)
		var ts []trace.Turn
		for j := range turns {
			for range 4 {
				ids = append(ids, int64(i*1000+len(ids)))
			}
			ts = append(ts, trace.Turn{Index: j, In: 256 * (j + 1), Out: 48, HashIDs: ids[:len(ids):len(ids)], ThinkTime: 1, BlockSize: 64})
		}
		out[i] = load.Session{ID: fmt.Sprintf("s%d", i), Tier: "light", Turns: ts}
	}
	return out
}

// TestHTTPRouteCanaryOnAPIServer runs a canary whose split is an HTTPRoute
// on a real kube-apiserver (the Gateway API's own CRD installed): two
// simulators on a virtual clock are the baseline and the candidate behind
// a stand-in for the gateway's data plane that routes by the route's
// weights. The weights on the API server follow the share steps, go to 0
// at once when the candidate is made worse, and are put back at the end;
// a rule without session persistence is refused before anything is
// written.
func TestHTTPRouteCanaryOnAPIServer(t *testing.T) {
	cfg := realAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	installHTTPRouteCRD(t, ctx, cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "llm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gw, err := gwclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	routes := gw.GatewayV1().HTTPRoutes("llm")
	port := gwv1.PortNumber(8000)
	zero := int32(0)
	route := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "llm"},
		Spec: gwv1.HTTPRouteSpec{Rules: []gwv1.HTTPRouteRule{{
			BackendRefs: []gwv1.HTTPBackendRef{
				{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "vllm-today", Port: &port}}},
				{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "vllm-cand", Port: &port}, Weight: &zero}},
			},
		}}},
	}
	split := func() *canary.HTTPRouteSplit {
		return &canary.HTTPRouteSplit{Routes: routes, Namespace: "llm", Name: "chat", Baseline: "vllm-today", Candidate: "vllm-cand", SessionHeader: "X-Session-Id"}
	}

	// without session persistence the rule is refused, and left alone
	created, err := routes.Create(ctx, route, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := split().SetShare(ctx, 0.1); err == nil || !strings.Contains(err.Error(), "no sessionPersistence") {
		t.Fatalf("a rule without session persistence: %v, want it refused", err)
	}
	if got, err := routes.Get(ctx, "chat", metav1.GetOptions{}); err != nil || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("the refused route was written (%v)", err)
	}

	// with header persistence on the agents' session header, stored as given
	header := gwv1.HeaderBasedSessionPersistence
	name := "X-Session-Id"
	created.Spec.Rules[0].SessionPersistence = &gwv1.SessionPersistence{Type: &header, SessionName: &name}
	created, err = routes.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sp := created.Spec.Rules[0].SessionPersistence; sp == nil || sp.SessionName == nil || *sp.SessionName != name {
		t.Fatalf("the API server kept sessionPersistence %+v: is the CRD the experimental channel's?", sp)
	}
	found := weightString(created)

	plan := canary.Plan{
		Shares: []float64{0.1, 0.3, 0.5},
		Hold:   2 * time.Minute, MaxHold: 6 * time.Minute,
		Window: 30 * time.Second, Scrape: 5 * time.Second,
		Bar:     verdict.Bar{TTFTP90: 5, InteractivityP90: 10, ErrorRate: 0.1},
		Options: verdict.Options{Resamples: 400, Seed: 1, Confidence: 0.95, MinSentFraction: 0.95},
		Kill:    canary.Kill{QueuePerSession: 4, ErrorRate: 0.5, TTFTFactor: 4},
		NoWorse: canary.NoWorse{Tolerance: 0.5, ErrorPoints: 0.05},
	}
	var (
		res        canary.Result
		runErr     error
		front      *gatewayStandIn
		worsenedAt = -1.0
		onServer   []string // the route's weights on the API server at each tick
		tickErrs   []string
		records    int // the load generator's records (on the clock: one goroutine at a time)
		lost       int // of them, lost or cut (none should be)
	)
	clock := timescale.NewVirtual()
	mnet := memnet.New(clock)
	clock.Run(func() {
		vctx, vcancel := clock.WithCancel(ctx)
		defer vcancel()
		var sims [2]*sim.Sim
		var scrapers [2]canary.Scraper
		var handlers [2]http.Handler
		for side := range sims {
			s, err := sim.New(sim.Options{Profile: sim.DefaultProfile(), Seed: uint64(side + 1), Clock: clock, Net: mnet})
			if err != nil {
				t.Fatal(err)
			}
			sims[side], handlers[side] = s, s.Handler()
			url := mnet.Serve(handlers[side])
			clock.Go(func() { _ = s.Run(vctx) })
			scrapers[side] = &signal.Scraper{Targets: []string{url + "/metrics"}, Mapping: signal.VLLM(), Client: mnet.Client(), Sequential: true}
		}
		rt, err := canary.NewRouter(canary.RouterOptions{Clock: clock, Baseline: handlers[0], Candidate: handlers[1], Sessions: canary.Sessions{Header: "X-Session-Id"}})
		if err != nil {
			t.Fatal(err)
		}
		front = &gatewayStandIn{clock: clock, routes: routes, router: rt}
		client := load.NewClientConn(mnet.Serve(front), sim.DefaultProfile().Model, transport.Conn{RoundTripper: mnet.Transport()})
		gen := load.NewGenerator(load.Options{
			Client: client, Clock: clock,
			Tiers: map[string][]load.Session{"light": synthSessions(400, 6)}, Mix: []load.TierShare{{Tier: "light", Share: 1}},
			Prompts:   prompt.Builder{Seed: 7},
			ThinkTime: load.ThinkCapped, ThinkCap: 5 * time.Second,
			Timeout: 5 * time.Minute, Seed: 3,
			Sink: func(r load.Record) {
				records++
				if r.Error == load.ErrConnect || r.Error == load.ErrStream || r.Error == load.ErrAborted || r.Error == load.ErrTimeout {
					lost++
				}
			},
		})
		gen.SetSessions(40)
		// live traffic flows on today's recipe before the canary begins
		_ = clock.Sleep(vctx, 90*time.Second)
		ctl := &canary.Controller{Plan: plan, Clock: clock, Split: split(), Scrapers: scrapers, Log: t.Logf,
			OnTick: func(tk canary.Tick) {
				got, err := routes.Get(ctx, "chat", metav1.GetOptions{})
				if err != nil {
					tickErrs = append(tickErrs, err.Error())
					return
				}
				w := weightString(got)
				onServer = append(onServer, fmt.Sprintf("%.0fs %s %s", tk.At, tk.Decision, w))
				t.Logf("t=%4.0fs share %3.0f%% windows %d: baseline %s, candidate %s, no worse %s: %s: %s; on the API server %s",
					tk.At, 100*tk.Share, tk.Windows, tk.Baseline.Verdict, tk.Candidate.Verdict, tk.NoWorse.Verdict, tk.Decision, tk.Why, w)
				// a tick is seen before a raise is written, after a
				// rollback is
				want := shareWeights(tk.Share)
				if tk.Decision == "rollback" {
					want = strings.Split(want, "/")[0] + "/0"
				}
				if w != want {
					tickErrs = append(tickErrs, fmt.Sprintf("t=%.0fs %s at share %g: the API server has %s, want %s", tk.At, tk.Decision, tk.Share, w, want))
				}
				// made worse two windows into the last share: it refuses
				// nine requests in ten, as an overloaded server does
				if worsenedAt < 0 && tk.Step == len(plan.Shares)-1 && tk.Windows == 2 {
					if err := sims[1].SetFaults(sim.Faults{Refuse: &sim.Refusals{Share: 0.9, Status: http.StatusServiceUnavailable}}); err != nil {
						t.Errorf("worsening the candidate: %v", err)
					}
					worsenedAt = tk.At
				}
			}}
		res, runErr = ctl.Run(vctx)
		_ = clock.Sleep(vctx, 30*time.Second)
		gen.Stop(10 * time.Minute)
		vcancel()
		for _, s := range sims {
			_ = s.Close()
		}
	})
	if runErr != nil {
		t.Fatal(runErr)
	}
	t.Logf("outcome %s: %s", res.Outcome, res.Reason)
	for _, w := range res.Weights {
		t.Logf("wrote %s: share %g, weights %s, resourceVersion %s", w.Why, w.Share, w.Weights, w.ResourceVersion)
	}
	t.Logf("the stand-in data plane applied the weights %v", front.seen)
	for _, e := range tickErrs {
		t.Error(e)
	}
	if front.err != nil {
		t.Errorf("the stand-in data plane could not read the route: %v", front.err)
	}
	if len(res.Steps) != 3 || res.Steps[0].Outcome != "raise" || res.Steps[1].Outcome != "raise" || res.Outcome != canary.Failed || res.Steps[2].Outcome != "rollback" {
		t.Fatalf("outcome %s (%s), steps %+v: want raised twice, then the worsened candidate rolled back", res.Outcome, res.Reason, res.Steps)
	}
	// the kill switch's rule trips within a window of the worsening (it
	// reads the last window's errors at every scrape), and the rollback
	// tick above already saw the candidate's weight at 0 on the API server
	if last := res.Ticks[len(res.Ticks)-1]; worsenedAt < 0 || last.At-worsenedAt > plan.Window.Seconds() {
		t.Errorf("rolled back at %.0fs, worsened at %.0fs: want within a window", last.At, worsenedAt)
	}
	var wrote []string
	for _, w := range res.Weights {
		wrote = append(wrote, w.Why+" "+w.Weights.String())
	}
	want := "begin 900/100, raise 700/300, raise 500/500, rollback 500/0, restore " + found
	if strings.Join(wrote, ", ") != want {
		t.Errorf("weights written %s, want %s", strings.Join(wrote, ", "), want)
	}
	end, err := routes.Get(ctx, "chat", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := weightString(end); got != found || end.ResourceVersion != res.Weights[len(res.Weights)-1].ResourceVersion {
		t.Errorf("at the end the API server has %s (resourceVersion %s), want the weights found, %s, as the restore wrote them", got, end.ResourceVersion, found)
	}
	if res.ClientView || len(res.Notes) == 0 {
		t.Errorf("client view %v, notes %q: a gateway's split has no client view, and says so", res.ClientView, res.Notes)
	}
	c := front.router.Snapshot().Counts
	t.Logf("stand-in data plane: baseline %d requests (%d sessions), candidate %d (%d sessions)", c[0].Requests, c[0].Sessions, c[1].Requests, c[1].Sessions)
	t.Logf("client: %d records, %d lost or cut", records, lost)
	if lost > 0 {
		t.Errorf("%d requests lost or cut by the switch", lost)
	}
	if c[1].Sessions == 0 {
		t.Error("no session went to the candidate")
	}
	if dir := os.Getenv("HEADROOM_CANARY_OUT"); dir != "" {
		if err := res.Write(dir); err != nil {
			t.Error(err)
		}
	}
}
