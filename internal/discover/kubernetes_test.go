package discover

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/signal"
)

// slice is an EndpointSlice of service svc with one port named "metrics"
// and the given endpoints.
func slice(name, svc string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	portName := "metrics"
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "llm", Labels: map[string]string{discoveryv1.LabelServiceName: svc, "app": svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		Endpoints:   eps,
	}
}

// endpoint is one pod's endpoint; ready and serving nil leave them unset.
func endpoint(addr string, ready, serving *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving}}
}

func TestTargets(t *testing.T) {
	yes, no := new(true), new(false)
	objs := []runtime.Object{
		slice("vllm-a", "vllm", 8000,
			endpoint("10.0.0.1", yes, yes), // ready
			endpoint("10.0.0.2", nil, nil), // conditions unset read as ready
			endpoint("10.0.0.3", no, no),   // not ready: left out
			endpoint("10.0.0.4", no, yes)), // terminating but still serving: kept
		slice("vllm-b", "vllm", 8000, endpoint("10.0.0.1", yes, yes)), // the same pod in two slices: once
		slice("vllm-v6", "vllm", 8000, endpoint("fd00::5", yes, yes)),
		slice("other", "sglang", 30000, endpoint("10.0.1.1", yes, yes)),
	}
	objs[2].(*discoveryv1.EndpointSlice).AddressType = discoveryv1.AddressTypeIPv6
	client := fake.NewClientset(objs...)
	cases := []struct {
		name string // what the case shows
		spec recipe.KubernetesDiscovery
		want string // the targets joined by spaces, or a substring of the error
		err  bool
	}{
		{"service, named port", recipe.KubernetesDiscovery{Namespace: "llm", Service: "vllm", Port: "metrics"},
			"http://10.0.0.1:8000/metrics http://10.0.0.2:8000/metrics http://10.0.0.4:8000/metrics http://[fd00::5]:8000/metrics", false},
		{"selector, numbered port, path and scheme", recipe.KubernetesDiscovery{Namespace: "llm", Selector: "app=sglang", Port: "9100", Path: "/stats", Scheme: "https"},
			"https://10.0.1.1:9100/stats", false},
		{"no such port name", recipe.KubernetesDiscovery{Namespace: "llm", Service: "vllm", Port: "http"},
			`no port named "http" (they name metrics)`, true},
		{"no such service", recipe.KubernetesDiscovery{Namespace: "llm", Service: "tgi", Port: "metrics"},
			"no EndpointSlices for service tgi in namespace llm", true},
		{"another namespace", recipe.KubernetesDiscovery{Service: "vllm", Port: "metrics"},
			"in namespace default", true},
	}
	for _, c := range cases {
		k, err := NewKubernetes(client, c.spec, "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := k.Targets(context.Background())
		switch {
		case c.err && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: targets %q, error %v; want an error holding %q", c.name, got, err, c.want)
		case !c.err && (err != nil || strings.Join(got, " ") != c.want):
			t.Errorf("%s: targets %q, error %v; want %s", c.name, got, err, c.want)
		}
	}
	for _, bad := range []recipe.KubernetesDiscovery{
		{Service: "vllm"}, // no port
		{Port: "metrics"}, // neither service nor selector
		{Service: "vllm", Selector: "app=vllm", Port: "metrics"}, // both
		{Selector: "app in (", Port: "metrics"},                  // not a selector
		{Service: "vllm", Port: "70000"},                         // not a port
	} {
		if _, err := NewKubernetes(client, bad, ""); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestForbiddenSaysWhatRBACIsNeeded checks the error when the service
// account may not list EndpointSlices.
func TestForbiddenSaysWhatRBACIsNeeded(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", fmt.Errorf("no RBAC"))
	})
	k, err := NewKubernetes(client, recipe.KubernetesDiscovery{Namespace: "llm", Service: "vllm", Port: "metrics"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = k.Targets(context.Background())
	if err == nil || !strings.Contains(err.Error(), "get, list and watch on endpointslices.discovery.k8s.io") {
		t.Errorf("error %v: want one naming the RBAC rule", err)
	}
}

// engine is a loopback stand-in for one pod's vLLM /metrics, its request
// count set by the test.
type engine struct {
	srv  *httptest.Server
	port int32
	mu   sync.Mutex
	n    int
}

func newEngine(t *testing.T) *engine {
	e := &engine{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		n := e.n
		e.mu.Unlock()
		fmt.Fprintf(w, "# TYPE vllm:request_success_total counter\nvllm:request_success_total{engine=\"0\",finished_reason=\"stop\"} %d\n", n)
	}))
	t.Cleanup(e.srv.Close)
	u, _ := url.Parse(e.srv.URL)
	p, _ := strconv.Atoi(u.Port())
	e.port = int32(p)
	return e
}

func (e *engine) set(n int) {
	e.mu.Lock()
	e.n = n
	e.mu.Unlock()
}

// TestScraperFollowsPods scrapes the pods behind a fake Service, each a
// loopback engine with its own EndpointSlice (loopback pods differ by port,
// not address), while a pod goes away and a new one comes: windows count
// what each pod served while it was there and nothing twice.
func TestScraperFollowsPods(t *testing.T) {
	a, b, c := newEngine(t), newEngine(t), newEngine(t)
	yes := new(true)
	client := fake.NewClientset(
		slice("vllm-a", "vllm", a.port, endpoint("127.0.0.1", yes, yes)),
		slice("vllm-b", "vllm", b.port, endpoint("127.0.0.1", yes, yes)),
	)
	k, err := NewKubernetes(client, recipe.KubernetesDiscovery{Namespace: "llm", Service: "vllm", Port: "metrics"}, "")
	if err != nil {
		t.Fatal(err)
	}
	sc := &signal.Scraper{Discover: k.Targets, Mapping: signal.VLLM()}
	ctx := context.Background()
	slices := client.DiscoveryV1().EndpointSlices("llm")
	var samples []signal.Sample
	scrape := func(sec int) {
		t.Helper()
		s, err := sc.Scrape(ctx, time.Duration(sec)*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s)
	}
	a.set(100)
	b.set(40)
	scrape(0)
	a.set(150)
	b.set(70)
	scrape(10)
	// Pod b goes away (its last 5 requests were scraped at 10s... and it
	// served 5 more that no scrape saw); pod c comes with 12 served.
	b.set(75)
	if err := slices.Delete(ctx, "vllm-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.set(12)
	if _, err := slices.Create(ctx, slice("vllm-c", "vllm", c.port, endpoint("127.0.0.1", yes, yes)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.set(200)
	scrape(20)
	a.set(260)
	c.set(30)
	scrape(30)
	ws := signal.Windows(samples, 0, 30*time.Second, 10*time.Second)
	want := []float64{80, 50 + 12, 60 + 18} // a 50 + b 30; a 50 + c from zero; a 60 + c 18
	var got []float64
	for _, w := range ws {
		got = append(got, w.Counter[signal.RequestsOK])
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests_ok per window %v, want %v (warnings %q)", got, want, ws[1].Warnings)
	}
	t.Logf("requests_ok per window %v; parts per scrape %d %d %d %d; window 2 warnings %q", got,
		len(samples[0].Parts), len(samples[1].Parts), len(samples[2].Parts), len(samples[3].Parts), ws[1].Warnings)

	// The Service loses every endpoint: the scrape keeps the last pods
	// found and says that finding them failed.
	for _, name := range []string{"vllm-a", "vllm-c"} {
		if err := slices.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := sc.Scrape(ctx, 40*time.Second)
	if err != nil || len(s.Errors) != 1 || !strings.Contains(s.Errors[0], "scraped the 2 found before") {
		t.Errorf("scrape with no EndpointSlices left: %v, errors %q", err, s.Errors)
	}
}
