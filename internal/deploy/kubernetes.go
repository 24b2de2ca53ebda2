package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// FieldManager is the server-side apply field manager headroom applies as.
const FieldManager = "headroom"

// ReadyConditions are the built-in readiness rules: an object of this kind is
// ready when its status has this condition True for its current generation.
var ReadyConditions = map[string]string{
	"ModelDeployment":  "ReplicasReady", // Modelplane (modelplane.ai/v1alpha1): True, reason AllReplicasReady, once every ModelReplica is Ready
	"Deployment":       "Available",
	"LeaderWorkerSet":  "Available",
	"InferenceService": "Ready", // KServe
}

// Mapper finds the API resource that serves a kind, and whether its
// objects live in a namespace.
type Mapper interface {
	Resource(ctx context.Context, gvk schema.GroupVersionKind) (gvr schema.GroupVersionResource, namespaced bool, err error)
}

// Connect makes a dynamic client and a discovery mapper from a kubeconfig
// file and context; empty ones use $KUBECONFIG, ~/.kube/config or the
// in-cluster service account, as kubectl does. Nothing is sent to the
// cluster until the client or mapper is used.
func Connect(kubeconfig, kubeContext string) (dynamic.Interface, Mapper, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client config: %v; set deploy.kubernetes.kubeconfig or $KUBECONFIG, or run in a pod with a service account", err)
	}
	cfg.UserAgent = "headroom"
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %v", err)
	}
	mapper, err := NewDiscovery(cfg)
	if err != nil {
		return nil, nil, err
	}
	return client, mapper, nil
}

// ReadManifests reads YAML files of one or more objects each (separated by
// "---"; a kind List is expanded), in order. Every object needs apiVersion,
// kind and metadata.name.
func ReadManifests(paths ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		objs, err := DecodeManifests(b, p)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("manifests %v hold no objects; list the files with the recipe's resources", paths)
	}
	return out, nil
}

// DecodeManifests decodes the YAML documents in b; name is used in errors.
func DecodeManifests(b []byte, name string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		chunk, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %v", name, doc, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(chunk, &m); err != nil {
			return nil, fmt.Errorf("%s: document %d: %v", name, doc, err)
		}
		if len(m) == 0 {
			continue // empty document or comments only
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			items, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: document %d: %v", name, doc, err)
			}
			for i := range items.Items {
				it := &items.Items[i]
				if err := checkObject(it); err != nil {
					return nil, fmt.Errorf("%s: document %d item %d: %v", name, doc, i, err)
				}
				out = append(out, it)
			}
			continue
		}
		if err := checkObject(u); err != nil {
			return nil, fmt.Errorf("%s: document %d: %v", name, doc, err)
		}
		out = append(out, u)
	}
}

func checkObject(u *unstructured.Unstructured) error {
	var missing []string
	if u.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if u.GetKind() == "" {
		missing = append(missing, "kind")
	}
	if u.GetName() == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return fmt.Errorf("object lacks %s", strings.Join(missing, ", "))
	}
	if u.GetGenerateName() != "" {
		return errors.New("metadata.generateName cannot be applied or rolled back; give a fixed metadata.name")
	}
	return nil
}

// KubernetesConfig is what a Kubernetes deployer needs.
type KubernetesConfig struct {
	Client dynamic.Interface
	Mapper Mapper
	// Objects are applied in order and restored in reverse order.
	Objects []*unstructured.Unstructured
	// Namespace is given to namespaced objects that name none ("default"
	// when empty).
	Namespace string
	// Ready adds to or overrides ReadyConditions (kind -> condition type).
	Ready map[string]string
	Options
}

// Kubernetes deploys a recipe's manifests with server-side apply, waits for
// them to be ready and for the endpoint to list the model, and rolls back to
// a snapshot taken before the apply.
type Kubernetes struct {
	client    dynamic.Interface
	mapper    Mapper
	namespace string
	opts      Options
	objs      []*object

	mu           sync.Mutex
	resolved     bool // every object has its resource
	snapped      bool // a snapshot is held: Rollback has work to do
	servedBefore bool // the endpoint listed the model before the apply
}

// object is one manifest object with where it lives and what it was.
type object struct {
	want  *unstructured.Unstructured
	res   dynamic.ResourceInterface
	desc  string // "Deployment serving/vllm"
	cond  string // condition type that means ready; "" when none applies
	prior *unstructured.Unstructured
	// touched is set once an apply of the object was sent (it may have
	// landed even if the call failed).
	touched bool
}

// NewKubernetes makes a Kubernetes deployer; it sends nothing to the
// cluster. Deploy first maps every object to its API resource, so an
// unknown kind (a CRD that is not installed) fails before anything is
// applied.
func NewKubernetes(c KubernetesConfig) (*Kubernetes, error) {
	if c.Client == nil || c.Mapper == nil {
		return nil, errors.New("kubernetes deployer: a client and a mapper are required")
	}
	if len(c.Objects) == 0 {
		return nil, errors.New("kubernetes deployer: no objects to apply")
	}
	conds := map[string]string{}
	for k, v := range ReadyConditions {
		conds[k] = v
	}
	for k, v := range c.Ready {
		conds[k] = v
	}
	k := &Kubernetes{client: c.Client, mapper: c.Mapper, namespace: c.Namespace, opts: c.Options.withDefaults()}
	if k.namespace == "" {
		k.namespace = "default"
	}
	for _, in := range c.Objects {
		u := in.DeepCopy()
		k.objs = append(k.objs, &object{want: u, desc: u.GetKind() + " " + u.GetName(), cond: conds[u.GetKind()]})
	}
	return k, nil
}

// resolve maps every object to its resource client, once.
func (k *Kubernetes) resolve(ctx context.Context) error {
	if k.resolved {
		return nil
	}
	seen := map[string]bool{}
	for _, ob := range k.objs {
		u := ob.want
		gvr, namespaced, err := k.mapper.Resource(ctx, u.GroupVersionKind())
		if err != nil {
			return fmt.Errorf("%s %s: %w (nothing was applied)", u.GetAPIVersion(), u.GetKind(), err)
		}
		if namespaced {
			if u.GetNamespace() == "" {
				u.SetNamespace(k.namespace)
			}
			ob.res = k.client.Resource(gvr).Namespace(u.GetNamespace())
			ob.desc = u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
		} else {
			u.SetNamespace("")
			ob.res = k.client.Resource(gvr)
		}
		key := gvr.String() + " " + ob.desc
		if seen[key] {
			return fmt.Errorf("%s appears twice in the manifests; keep one (nothing was applied)", ob.desc)
		}
		seen[key] = true
	}
	k.resolved = true
	return nil
}

// Deploy snapshots every object, applies them in order with server-side
// apply (field manager "headroom", forcing ownership of the fields the
// manifests set), and waits until they are ready and the endpoint lists the
// model.
func (k *Kubernetes) Deploy(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.snapped {
		return errors.New("already deployed: roll back before deploying again")
	}
	if err := k.resolve(ctx); err != nil {
		return err
	}
	for _, ob := range k.objs {
		cur, err := ob.res.Get(ctx, ob.want.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			ob.prior = nil
		case err != nil:
			return fmt.Errorf("snapshot %s before applying: %w (nothing was applied)", ob.desc, err)
		default:
			ob.prior = clean(cur)
		}
		ob.touched = false
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	k.servedBefore = Serving(pctx, k.opts.HTTP, k.opts.Endpoint, k.opts.Model) == nil
	cancel()
	k.snapped = true
	for _, ob := range k.objs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s before applying %s: %w", why(err), ob.desc, err)
		}
		ob.touched = true
		_, err := ob.res.Apply(ctx, ob.want.GetName(), ob.want, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("apply %s: %w", ob.desc, err)
		}
		k.opts.logf("applied %s", ob.desc)
	}
	return k.waitServing(ctx, k.objs, true)
}

// Ready waits until every object with a readiness rule is ready and the
// endpoint lists the model.
func (k *Kubernetes) Ready(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.resolve(ctx); err != nil {
		return err
	}
	return k.waitServing(ctx, k.objs, true)
}

func (k *Kubernetes) waitServing(ctx context.Context, objs []*object, endpoint bool) error {
	ctx, cancel := context.WithTimeout(ctx, k.opts.ReadyTimeout)
	defer cancel()
	if left := k.waitReady(ctx, objs); len(left) > 0 {
		return fmt.Errorf("not ready (%s: %w):\n  %s", why(ctx.Err()), ctx.Err(), strings.Join(left, "\n  "))
	}
	if !endpoint {
		return nil
	}
	k.opts.logf("objects ready; waiting for %s to list %s", k.opts.Endpoint, k.opts.Model)
	return WaitServing(ctx, k.opts.HTTP, k.opts.Endpoint, k.opts.Model, k.opts.Poll)
}

// waitReady polls until every object with a readiness rule is ready, or ctx
// is done; it returns one line per object still not ready.
func (k *Kubernetes) waitReady(ctx context.Context, objs []*object) []string {
	pending := slices.DeleteFunc(slices.Clone(objs), func(ob *object) bool { return ob.cond == "" })
	for {
		var left []string
		next := pending[:0]
		for _, ob := range pending {
			cur, err := ob.res.Get(ctx, ob.want.GetName(), metav1.GetOptions{})
			var ok bool
			var reason string
			if err != nil {
				reason = err.Error()
			} else {
				ok, reason = Readiness(cur, ob.cond)
			}
			if !ok {
				next = append(next, ob)
				left = append(left, ob.desc+": "+reason)
			}
		}
		pending = next
		if len(pending) == 0 {
			return nil
		}
		if sleep(ctx, k.opts.Poll) != nil {
			return left
		}
	}
}

// waitGone polls until every object is gone (NotFound), or ctx is done; it
// returns one line per object still there.
func (k *Kubernetes) waitGone(ctx context.Context, objs []*object) []string {
	pending := slices.Clone(objs)
	for {
		var left []string
		next := pending[:0]
		for _, ob := range pending {
			_, err := ob.res.Get(ctx, ob.want.GetName(), metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				next = append(next, ob)
				left = append(left, ob.desc+": still exists after delete (it did not exist before the run)")
			}
		}
		pending = next
		if len(pending) == 0 {
			return nil
		}
		if sleep(ctx, k.opts.Poll) != nil {
			return left
		}
	}
}

// Rollback restores every object the deploy touched to its snapshot, in
// reverse order: objects that existed are replaced by their snapshot (a full
// update, so fields the candidate added go whoever owns them) or recreated,
// objects that did not exist are deleted. It then waits until deleted objects
// are gone, restored ones are ready and, if the endpoint served before, until
// it lists the model again. It tries every object before reporting, and
// keeps the snapshot when it fails, so it can be retried.
func (k *Kubernetes) Rollback(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.snapped {
		return nil
	}
	var left []string
	var restored, deleted []*object
	for i := len(k.objs) - 1; i >= 0; i-- {
		ob := k.objs[i]
		if !ob.touched {
			continue
		}
		if ob.prior == nil {
			err := ob.res.Delete(ctx, ob.want.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%s: delete failed (it did not exist before the run): %v", ob.desc, err))
				continue
			}
			k.opts.logf("rollback: deleted %s", ob.desc)
			deleted = append(deleted, ob)
			continue
		}
		if err := restore(ctx, ob); err != nil {
			left = append(left, fmt.Sprintf("%s: restore failed: %v", ob.desc, err))
			continue
		}
		k.opts.logf("rollback: restored %s", ob.desc)
		restored = append(restored, ob)
	}
	wctx, cancel := context.WithTimeout(ctx, k.opts.ReadyTimeout)
	defer cancel()
	left = append(left, k.waitGone(wctx, deleted)...)
	left = append(left, k.waitReady(wctx, restored)...)
	if k.servedBefore && len(left) == 0 {
		if err := WaitServing(wctx, k.opts.HTTP, k.opts.Endpoint, k.opts.Model, k.opts.Poll); err != nil {
			left = append(left, fmt.Sprintf("endpoint %s served model %s before the run and does not now: %v", k.opts.Endpoint, k.opts.Model, err))
		}
	}
	if len(left) > 0 {
		return &RollbackError{Left: left}
	}
	k.snapped = false
	for _, ob := range k.objs {
		ob.prior, ob.touched = nil, false
	}
	return nil
}

// restore puts an object back to its snapshot, retrying on write conflicts.
func restore(ctx context.Context, ob *object) error {
	var err error
	for range 5 {
		var cur *unstructured.Unstructured
		cur, err = ob.res.Get(ctx, ob.want.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = ob.res.Create(ctx, ob.prior.DeepCopy(), metav1.CreateOptions{FieldManager: FieldManager})
			return err
		}
		if err != nil {
			return err
		}
		want := ob.prior.DeepCopy()
		want.SetResourceVersion(cur.GetResourceVersion())
		_, err = ob.res.Update(ctx, want, metav1.UpdateOptions{FieldManager: FieldManager})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// clean strips what the server owns from a live object, leaving what can be
// written back.
func clean(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "status")
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields",
		"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	return c
}

// Readiness reports whether obj has condition cond True for its current
// generation, and if not, why. A controller that has not yet observed the
// latest generation (status.observedGeneration, or the condition's own
// observedGeneration) is not ready, so a stale condition from the previous
// rollout does not count. A Deployment also needs all its replicas updated
// and available.
func Readiness(obj *unstructured.Unstructured, cond string) (bool, string) {
	gen := obj.GetGeneration()
	if og, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); found && og < gen {
		return false, fmt.Sprintf("controller has seen generation %d, not %d yet", og, gen)
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var c map[string]any
	for _, x := range conds {
		if m, ok := x.(map[string]any); ok && m["type"] == cond {
			c = m
		}
	}
	if c == nil {
		return false, "no " + cond + " condition yet"
	}
	if og, found, _ := unstructured.NestedInt64(c, "observedGeneration"); found && og < gen {
		return false, fmt.Sprintf("%s is from generation %d, not %d", cond, og, gen)
	}
	if s, _ := c["status"].(string); s != "True" {
		msg := fmt.Sprintf("%s=%s", cond, s)
		if r, _ := c["reason"].(string); r != "" {
			msg += " (" + r
			if m, _ := c["message"].(string); m != "" {
				msg += ": " + m
			}
			msg += ")"
		}
		return false, msg
	}
	if obj.GetKind() == "Deployment" {
		want, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		if !found {
			want = 1
		}
		upd, _, _ := unstructured.NestedInt64(obj.Object, "status", "updatedReplicas")
		avail, _, _ := unstructured.NestedInt64(obj.Object, "status", "availableReplicas")
		if upd < want || avail < want {
			return false, fmt.Sprintf("%d of %d replicas updated, %d available", upd, want, avail)
		}
	}
	return true, ""
}
