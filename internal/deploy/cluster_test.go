package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The kinds the fake cluster serves.
var (
	gvkModel  = schema.GroupVersionKind{Group: "modelplane.test", Version: "v1", Kind: "ModelDeployment"}
	gvkDeploy = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	gvkCM     = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvkNS     = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
)

// staticMapper maps the fake cluster's kinds to resources.
type staticMapper map[schema.GroupVersionKind]struct {
	res        string
	namespaced bool
}

func (m staticMapper) Resource(_ context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	r, ok := m[gvk]
	if !ok {
		return schema.GroupVersionResource{}, false, fmt.Errorf("no kind %s", gvk)
	}
	return gvk.GroupVersion().WithResource(r.res), r.namespaced, nil
}

var mapper = staticMapper{
	gvkModel:  {"modeldeployments", true},
	gvkDeploy: {"deployments", true},
	gvkCM:     {"configmaps", true},
	gvkNS:     {"namespaces", false},
}

// cluster is a fake API server (client-go's fake dynamic client over a
// field-managed tracker, so apply has server-side apply semantics), with
// generations bumped on spec changes like a real one, a controller that
// marks objects ready after a delay, and a gateway that lists the model
// while the ModelDeployment is ready.
type cluster struct {
	t       *testing.T
	client  *fake.FakeDynamicClient
	tracker k8stesting.ObjectTracker

	mu       sync.Mutex // serialises API calls with the controller
	calls    []string   // "verb resource name"
	fail     map[string]error
	delay    time.Duration // how long the controller takes to observe a generation
	seen     map[string]time.Time
	gwDown   bool
	model    string // the model the deployer waits for
	served   string // the model the gateway lists
	endpoint string
}

func newCluster(t *testing.T, objs ...*unstructured.Unstructured) *cluster {
	s := runtime.NewScheme()
	for gvk := range mapper {
		s.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		s.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
	}
	c := &cluster{t: t, fail: map[string]error{}, delay: 30 * time.Second, seen: map[string]time.Time{},
		model: "glm", served: "glm", endpoint: "http://gateway.test"}
	c.client = fake.NewSimpleDynamicClient(s)
	c.tracker = k8stesting.NewFieldManagedObjectTracker(s, serializer.NewCodecFactory(s).UniversalDecoder(), managedfields.NewDeducedTypeConverter())
	inner := k8stesting.ObjectReaction(c.tracker)
	c.client.ReactionChain = nil
	c.client.AddReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		name := actionName(a)
		c.calls = append(c.calls, a.GetVerb()+" "+a.GetResource().Resource+" "+name)
		if err := c.fail[a.GetVerb()+" "+a.GetResource().Resource]; err != nil {
			return true, nil, err
		}
		var before *unstructured.Unstructured
		if o, err := c.tracker.Get(a.GetResource(), a.GetNamespace(), name); err == nil {
			before = o.(*unstructured.Unstructured)
		}
		handled, obj, err := inner(a)
		if err != nil || a.GetSubresource() != "" {
			return handled, obj, err
		}
		switch a.GetVerb() {
		case "create", "update", "patch":
		default:
			return handled, obj, err
		}
		o, gerr := c.tracker.Get(a.GetResource(), a.GetNamespace(), name)
		if gerr != nil {
			return handled, obj, err
		}
		after := o.(*unstructured.Unstructured)
		var gen int64
		if before != nil {
			gen = before.GetGeneration()
			if fmt.Sprint(before.Object["spec"]) == fmt.Sprint(after.Object["spec"]) && after.GetGeneration() == gen {
				return handled, obj, err
			}
		}
		after.SetGeneration(gen + 1)
		if uerr := c.tracker.Update(a.GetResource(), after, a.GetNamespace()); uerr != nil {
			return true, nil, uerr
		}
		return true, after, nil
	})
	for _, o := range objs {
		m := mapper[o.GroupVersionKind()]
		o.SetGeneration(1)
		if err := c.tracker.Create(o.GroupVersionKind().GroupVersion().WithResource(m.res), o, o.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func actionName(a k8stesting.Action) string {
	switch x := a.(type) {
	case k8stesting.GetAction:
		return x.GetName()
	case k8stesting.DeleteAction:
		return x.GetName()
	case k8stesting.PatchAction:
		return x.GetName()
	case k8stesting.CreateAction:
		if m, err := metaName(x.GetObject()); err == nil {
			return m
		}
	case k8stesting.UpdateAction:
		if m, err := metaName(x.GetObject()); err == nil {
			return m
		}
	}
	return ""
}

func metaName(o runtime.Object) (string, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return "", fmt.Errorf("not unstructured")
	}
	return u.GetName(), nil
}

// control runs the controller until ctx is done: every second it marks each
// object whose generation it has watched for delay as observed, ready unless
// its spec.image contains "broken".
func (c *cluster) control(ctx context.Context) {
	for {
		c.mu.Lock()
		for gvk, m := range mapper {
			cond := ReadyConditions[gvk.Kind]
			if cond == "" {
				continue
			}
			gvr := gvk.GroupVersion().WithResource(m.res)
			l, err := c.tracker.List(gvr, gvk, "")
			if err != nil {
				c.t.Errorf("controller list %s: %v", gvr, err)
				continue
			}
			for _, item := range l.(*unstructured.UnstructuredList).Items {
				og, _, _ := unstructured.NestedInt64(item.Object, "status", "observedGeneration")
				if og == item.GetGeneration() {
					continue
				}
				key := fmt.Sprintf("%s/%s@%d", gvr.Resource, item.GetName(), item.GetGeneration())
				first, ok := c.seen[key]
				if !ok {
					c.seen[key] = time.Now()
					continue
				}
				if time.Since(first) < c.delay {
					continue
				}
				c.setStatus(&item, cond)
				if err := c.tracker.Update(gvr, &item, item.GetNamespace()); err != nil {
					c.t.Errorf("controller update: %v", err)
				}
			}
		}
		c.mu.Unlock()
		if sleep(ctx, time.Second) != nil {
			return
		}
	}
}

func (c *cluster) setStatus(u *unstructured.Unstructured, cond string) {
	img, _, _ := unstructured.NestedString(u.Object, "spec", "image")
	st, reason := "True", "AllReplicasReady"
	if strings.Contains(img, "broken") {
		st, reason = "False", "CrashLoopBackOff"
	}
	replicas, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	u.Object["status"] = map[string]any{
		"observedGeneration": u.GetGeneration(),
		"updatedReplicas":    replicas,
		"availableReplicas":  replicas,
		"conditions":         []any{map[string]any{"type": cond, "status": st, "reason": reason, "message": "engine " + img}},
	}
}

// get fetches an object from the tracker; nil when absent.
func (c *cluster) get(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, err := c.tracker.Get(gvk.GroupVersion().WithResource(mapper[gvk].res), ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return o.(*unstructured.Unstructured)
}

func (c *cluster) countCalls(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.calls {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// ServeHTTP is the gateway: /v1/models lists the model while the
// ModelDeployment "glm" is ready.
func (c *cluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	md := c.get(gvkModel, "serving", "glm")
	c.mu.Lock()
	down := c.gwDown
	c.mu.Unlock()
	if md == nil || down {
		http.Error(w, "no upstream", http.StatusServiceUnavailable)
		return
	}
	if ok, _ := Readiness(md, "ReplicasReady"); !ok {
		http.Error(w, "no upstream ready", http.StatusServiceUnavailable)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{map[string]any{"id": c.served, "object": "model"}}})
}

// roundTripper serves requests from a handler in memory, so endpoint probes
// run inside a synctest bubble.
type roundTripper struct{ h http.Handler }

func (rt roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	rt.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func (c *cluster) deployer(t *testing.T, objs []*unstructured.Unstructured, o Options) *Kubernetes {
	t.Helper()
	o.Endpoint, o.Model = c.endpoint, c.model
	o.HTTP = &http.Client{Transport: roundTripper{c}}
	if o.Poll == 0 {
		o.Poll = 2 * time.Second
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 10 * time.Minute
	}
	k, err := NewKubernetes(KubernetesConfig{Client: c.client, Mapper: mapper, Objects: objs, Namespace: "serving", Options: o})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func obj(gvk schema.GroupVersionKind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name}}}
	u.SetGroupVersionKind(gvk)
	if ns != "" {
		u.SetNamespace(ns)
	}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

// parentModel is the ModelDeployment production runs before the candidate.
func parentModel() *unstructured.Unstructured {
	u := obj(gvkModel, "serving", "glm", map[string]any{"image": "vllm:v1", "replicas": int64(2)})
	u.SetLabels(map[string]string{"owner": "platform"})
	u.Object["status"] = map[string]any{"observedGeneration": int64(1),
		"conditions": []any{map[string]any{"type": "ReplicasReady", "status": "True"}}}
	return u
}

// candidate is the recipe under test: a changed ModelDeployment and a new
// ConfigMap (omitting namespace: the recipe's namespace is used).
func candidate(image string) []*unstructured.Unstructured {
	return []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "glm-flags"},
			"data": map[string]any{"flags": "--max-num-seqs=512"}}},
		obj(gvkModel, "serving", "glm", map[string]any{"image": image, "replicas": int64(2), "args": []any{"--max-num-seqs", "512"}}),
	}
}
