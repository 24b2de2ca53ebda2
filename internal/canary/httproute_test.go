package canary

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/headroom-bench/headroom/internal/timescale"
)

// fakeRoutes is an API server's HTTPRoutes as far as the split uses them:
// one route, a resourceVersion bumped on every write, and a conflict for
// an update made from a stale read.
type fakeRoutes struct {
	mu      sync.Mutex
	route   *gwv1.HTTPRoute // nil: not found
	rv      int
	updates int
	// between runs after a Get and before the Update it leads to, as
	// another writer would (a status write, another controller).
	between func(f *fakeRoutes)
	// onWrite sees the weights of every write the split made.
	onWrite func(Weights)
	history []Weights
}

func (f *fakeRoutes) Get(_ context.Context, name string, _ metav1.GetOptions) (*gwv1.HTTPRoute, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.route == nil || f.route.Name != name {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "gateway.networking.k8s.io", Resource: "httproutes"}, name)
	}
	out := f.route.DeepCopy()
	if b := f.between; b != nil {
		f.between = nil
		f.mu.Unlock()
		b(f)
		f.mu.Lock()
	}
	return out, nil
}

func (f *fakeRoutes) Update(_ context.Context, rt *gwv1.HTTPRoute, _ metav1.UpdateOptions) (*gwv1.HTTPRoute, error) {
	f.mu.Lock()
	f.updates++
	if rt.ResourceVersion != f.route.ResourceVersion {
		f.mu.Unlock()
		return nil, apierrors.NewConflict(schema.GroupResource{Group: "gateway.networking.k8s.io", Resource: "httproutes"}, rt.Name, nil)
	}
	f.bumpLocked(rt.DeepCopy())
	w := routeWeights(f.route)
	f.history = append(f.history, w)
	out, hook := f.route.DeepCopy(), f.onWrite
	f.mu.Unlock()
	if hook != nil {
		hook(w)
	}
	return out, nil
}

func (f *fakeRoutes) bumpLocked(rt *gwv1.HTTPRoute) {
	f.rv++
	rt.ResourceVersion = strconv.Itoa(f.rv)
	f.route = rt
}

// edit changes the stored route as another writer would.
func (f *fakeRoutes) edit(change func(*gwv1.HTTPRoute)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rt := f.route.DeepCopy()
	change(rt)
	f.bumpLocked(rt)
}

func (f *fakeRoutes) writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, w := range f.history {
		out = append(out, w.String())
	}
	return out
}

// routeWeights reads rule 0's "today" and "cand" backendRefs' weights.
func routeWeights(rt *gwv1.HTTPRoute) Weights {
	var w Weights
	for _, ref := range rt.Spec.Rules[0].BackendRefs {
		switch ref.Name {
		case "today":
			w.Baseline = ref.Weight
		case "cand":
			w.Candidate = ref.Weight
		}
	}
	return w
}

func ptr[T any](v T) *T { return &v }

// testRoute is a route whose first rule sends everything to today (weight
// unset) and nothing to cand, and keeps sessions by X-Session-Id.
func testRoute() *gwv1.HTTPRoute {
	ref := func(name string, w *int32) gwv1.HTTPBackendRef {
		return gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(8000))}, Weight: w}}
	}
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "llm", ResourceVersion: "1"},
		Spec: gwv1.HTTPRouteSpec{Rules: []gwv1.HTTPRouteRule{{
			BackendRefs:        []gwv1.HTTPBackendRef{ref("today", nil), ref("cand", ptr(int32(0)))},
			SessionPersistence: &gwv1.SessionPersistence{Type: ptr(gwv1.HeaderBasedSessionPersistence), SessionName: ptr("X-Session-Id")},
		}}},
	}
}

func newFake(rt *gwv1.HTTPRoute) *fakeRoutes { return &fakeRoutes{route: rt, rv: 1} }

func newTestSplit(f *fakeRoutes) *HTTPRouteSplit {
	return &HTTPRouteSplit{Routes: f, Namespace: "llm", Name: "chat", Baseline: "today", Candidate: "cand", SessionHeader: "x-session-id"}
}

// TestHTTPRouteSplitSteps: each share step sets the two weights out of
// 1000, a rollback zeroes the candidate's at once, and a failed canary's
// end puts back the weights found (the baseline's left unset).
func TestHTTPRouteSplitSteps(t *testing.T) {
	f := newFake(testRoute())
	s := newTestSplit(f)
	ctx := context.Background()
	for _, share := range []float64{0.01, 0.05, 0.2} {
		if err := s.SetShare(ctx, share); err != nil {
			t.Fatalf("share %g: %v", share, err)
		}
	}
	if err := s.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, Failed); err != nil {
		t.Fatal(err)
	}
	want := []string{"990/10", "950/50", "800/200", "800/0", "unset/0"}
	if got := f.writes(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("weights written %v, want %v", got, want)
	}
	var whys []string
	for _, w := range s.Writes() {
		whys = append(whys, w.Why)
	}
	if strings.Join(whys, " ") != "begin raise raise rollback restore" {
		t.Errorf("writes %v", whys)
	}
	if s.Found().String() != "unset/0" {
		t.Errorf("found %s, want unset/0", s.Found())
	}
}

// TestHTTPRouteSplitReadyKeepsWeights: a ready candidate's route keeps the
// last share's weights; undecided puts back those found.
func TestHTTPRouteSplitReadyKeepsWeights(t *testing.T) {
	for _, tc := range []struct {
		outcome string
		want    string
	}{{Ready, "500/500"}, {Undecided, "unset/0"}, {Stopped, "unset/0"}} {
		f := newFake(testRoute())
		s := newTestSplit(f)
		if err := s.SetShare(context.Background(), 0.5); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(context.Background(), tc.outcome); err != nil {
			t.Fatal(err)
		}
		if got := routeWeights(f.route).String(); got != tc.want {
			t.Errorf("%s: weights %s at the end, want %s", tc.outcome, got, tc.want)
		}
	}
}

// TestHTTPRouteSplitRetriesOnConflict: a write between the split's read and
// its update (a gateway's status write) is a conflict; the split reads
// again and writes once the weights are still its own.
func TestHTTPRouteSplitRetriesOnConflict(t *testing.T) {
	f := newFake(testRoute())
	s := newTestSplit(f)
	if err := s.SetShare(context.Background(), 0.1); err != nil {
		t.Fatal(err)
	}
	f.between = func(f *fakeRoutes) {
		f.edit(func(rt *gwv1.HTTPRoute) { rt.Labels = map[string]string{"touched": "yes"} })
	}
	before := f.updates
	if err := s.SetShare(context.Background(), 0.3); err != nil {
		t.Fatalf("after a conflict: %v", err)
	}
	if f.updates-before != 2 || routeWeights(f.route).String() != "700/300" || f.route.Labels["touched"] != "yes" {
		t.Fatalf("%d updates, weights %s, labels %v: want a conflict, then 700/300 written over the other write", f.updates-before, routeWeights(f.route), f.route.Labels)
	}
}

// TestHTTPRouteSplitRefusesAnotherWriter: weights changed by someone else
// between steps are not overwritten by a raise or a restore; a rollback
// still zeroes the candidate and says what it found.
func TestHTTPRouteSplitRefusesAnotherWriter(t *testing.T) {
	f := newFake(testRoute())
	s := newTestSplit(f)
	ctx := context.Background()
	if err := s.SetShare(ctx, 0.1); err != nil {
		t.Fatal(err)
	}
	f.edit(func(rt *gwv1.HTTPRoute) { rt.Spec.Rules[0].BackendRefs[1].Weight = ptr(int32(600)) })
	n := len(f.writes())
	if err := s.SetShare(ctx, 0.3); err == nil || !strings.Contains(err.Error(), "someone else changed them") || !strings.Contains(err.Error(), "900/600") {
		t.Errorf("raise over another writer: %v, want a refusal naming the weights found", err)
	}
	if err := s.Finish(ctx, Failed); err == nil || !strings.Contains(err.Error(), "will not fight") {
		t.Errorf("restore over another writer: %v, want a refusal", err)
	}
	if len(f.writes()) != n {
		t.Fatalf("wrote %v after another writer changed the weights", f.writes()[n:])
	}
	if err := s.Rollback(ctx); err == nil || !strings.Contains(err.Error(), "set to 0 all the same") {
		t.Errorf("rollback over another writer: %v, want it done and said", err)
	}
	if got := routeWeights(f.route).String(); got != "900/0" {
		t.Errorf("weights %s after the rollback, want 900/0", got)
	}
}

// TestHTTPRouteSplitRefusesToBegin: a route the split cannot carry is
// refused before anything is written, naming what is wrong.
func TestHTTPRouteSplitRefusesToBegin(t *testing.T) {
	cases := []struct {
		name   string
		change func(*gwv1.HTTPRoute) *gwv1.HTTPRoute
		want   string
	}{
		{"no route", func(*gwv1.HTTPRoute) *gwv1.HTTPRoute { return nil }, "HTTPRoute llm/chat not found"},
		{"no such rule", func(rt *gwv1.HTTPRoute) *gwv1.HTTPRoute { rt.Spec.Rules = nil; return rt }, "no rule 0"},
		{"no candidate backendRef", func(rt *gwv1.HTTPRoute) *gwv1.HTTPRoute {
			rt.Spec.Rules[0].BackendRefs = rt.Spec.Rules[0].BackendRefs[:1]
			return rt
		}, "no backendRef for the candidate cand"},
		{"a third backend with weight", func(rt *gwv1.HTTPRoute) *gwv1.HTTPRoute {
			r := rt.Spec.Rules[0].BackendRefs[0]
			r.Name = "other"
			rt.Spec.Rules[0].BackendRefs = append(rt.Spec.Rules[0].BackendRefs, r)
			return rt
		}, "also sends traffic to other"},
		{"twice the same backendRef", func(rt *gwv1.HTTPRoute) *gwv1.HTTPRoute {
			rt.Spec.Rules[0].BackendRefs = append(rt.Spec.Rules[0].BackendRefs, rt.Spec.Rules[0].BackendRefs[1])
			return rt
		}, "two backendRefs named cand"},
		{"no session persistence", func(rt *gwv1.HTTPRoute) *gwv1.HTTPRoute {
			rt.Spec.Rules[0].SessionPersistence = nil
			return rt
		}, "has no sessionPersistence: the gateway would split each request by weight on its own, so a conversation would move between the copies and lose its cache"},
		{"another session header", func(rt *gwv1.HTTPRoute) *gwv1.HTTPRoute {
			rt.Spec.Rules[0].SessionPersistence.SessionName = ptr("X-Conversation")
			return rt
		}, "keeps sessions by header X-Conversation, but canary.session_header is x-session-id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(tc.change(testRoute()))
			err := newTestSplit(f).SetShare(context.Background(), 0.1)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if f.updates != 0 {
				t.Errorf("%d updates made on a refused route", f.updates)
			}
		})
	}
}

// runGatewayCanary runs a canary whose split is an HTTPRoute on the fake
// API server: the controller has no router, and the traffic goes through
// a router that stands in for the gateway's data plane, its share set from
// every weight the split writes (0 after a rollback moves the candidate's
// sessions too, as the canary's own router does).
func runGatewayCanary(t *testing.T, plan Plan, worsen func(Tick, *engine)) (Result, *fakeRoutes) {
	t.Helper()
	clock := timescale.NewVirtual()
	f := newFake(testRoute())
	var res Result
	var err error
	clock.Run(func() {
		ctx, cancel := clock.WithCancel(context.Background())
		defer cancel()
		gw, e := NewRouter(RouterOptions{Clock: clock, Baseline: answer{}, Candidate: answer{}})
		if e != nil {
			t.Fatal(e)
		}
		f.onWrite = func(w Weights) {
			if sh := w.share(); sh == 0 {
				gw.Rollback()
			} else {
				gw.SetShare(sh)
			}
		}
		base, cand := newEngine(gw, Baseline, 0.3, 0.02), newEngine(gw, Candidate, 0.3, 0.02)
		clock.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				body := `{"messages":[{"role":"user","content":"session ` + strconv.Itoa(i) + `"}]}`
				gw.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
				_ = clock.Sleep(ctx, 250*time.Millisecond)
			}
		})
		c := &Controller{Plan: plan, Clock: clock, Split: newTestSplit(f), Scrapers: [2]Scraper{base, cand}}
		if worsen != nil {
			c.OnTick = func(tk Tick) { worsen(tk, cand) }
		}
		res, err = c.Run(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range res.Ticks {
		t.Logf("t=%4.0fs share %3.0f%%: baseline %s, candidate %s, no worse %s: %s: %s", tk.At, 100*tk.Share, tk.Baseline.Verdict, tk.Candidate.Verdict, tk.NoWorse.Verdict, tk.Decision, tk.Why)
	}
	return res, f
}

// TestControllerWithHTTPRouteSplit: with a gateway's split the controller
// judges each side from its own server's counts (no client view, said in
// the notes), raises the route's weights step by step and leaves a ready
// candidate's; a clear miss zeroes the candidate's weight at once and the
// end puts back the weights found.
func TestControllerWithHTTPRouteSplit(t *testing.T) {
	res, f := runGatewayCanary(t, testPlan(), nil)
	if res.Outcome != Ready || len(res.Steps) != 2 || res.Steps[0].Outcome != "raise" {
		t.Fatalf("outcome %s (%s), steps %+v: want raised once, then ready", res.Outcome, res.Reason, res.Steps)
	}
	if got := strings.Join(f.writes(), " "); got != "900/100 500/500" {
		t.Errorf("weights written %s, want 900/100 500/500 (the last kept)", got)
	}
	if res.ClientView || len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "client's view is absent") || res.Final.Share != 0.5 || len(res.Weights) != 2 {
		t.Errorf("client view %v, notes %q, final %+v, weights %+v: want no client view, said so, share 0.5 and both writes", res.ClientView, res.Notes, res.Final, res.Weights)
	}
	for _, tk := range res.Ticks {
		if tk.Candidate.Requests != 0 || tk.Router.Counts != [2]Counts{} {
			t.Fatalf("t=%.0fs: a request count %d / %+v with no client view", tk.At, tk.Candidate.Requests, tk.Router.Counts)
		}
	}
	if md := string(res.Markdown()); !strings.Contains(md, "Requests: not seen") || !strings.Contains(md, "| raise | 50% | 500/500 |") {
		t.Errorf("canary.md lacks the weights or the absent requests:\n%s", md)
	}

	worsened := -1.0
	res, f = runGatewayCanary(t, testPlan(), func(tk Tick, cand *engine) {
		if tk.Step == 1 && worsened < 0 {
			cand.set(15)
			worsened = tk.At
		}
	})
	if res.Outcome != Failed || res.Final.Share != 0 {
		t.Fatalf("outcome %s (%s), share %g: want failed and share 0", res.Outcome, res.Reason, res.Final.Share)
	}
	if got := strings.Join(f.writes(), " "); got != "900/100 500/500 500/0 unset/0" {
		t.Errorf("weights written %s, want raised, the candidate zeroed, then the found weights back", got)
	}
	if last := res.Ticks[len(res.Ticks)-1]; last.Miss == "" || last.At-worsened > 2*testPlan().Scrape.Seconds() {
		t.Errorf("rolled back at %.0fs (worsened at %.0fs), miss %q: want the kill switch's rule within two scrapes", last.At, worsened, last.Miss)
	}
}
