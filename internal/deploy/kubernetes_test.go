package deploy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// checkRestored fails unless the cluster is back as it was before the
// candidate: the parent's ModelDeployment spec and labels, ready at its
// new generation, and no ConfigMap.
func checkRestored(t *testing.T, c *cluster) {
	t.Helper()
	md := c.get(gvkModel, "serving", "glm")
	if md == nil {
		t.Fatal("the parent's ModelDeployment is gone after rollback")
	}
	if want := parentModel().Object["spec"]; !reflect.DeepEqual(md.Object["spec"], want) {
		t.Errorf("ModelDeployment spec after rollback = %v, want the parent's %v", md.Object["spec"], want)
	}
	if md.GetLabels()["owner"] != "platform" {
		t.Errorf("labels after rollback = %v, want the parent's", md.GetLabels())
	}
	if ok, why := Readiness(md, "ReplicasReady"); !ok {
		t.Errorf("restored ModelDeployment not ready: %s", why)
	}
	if cm := c.get(gvkCM, "serving", "glm-flags"); cm != nil {
		t.Errorf("ConfigMap the candidate created is still there after rollback: %v", cm.Object)
	}
}

func TestKubernetesDeployAndRollback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, parentModel())
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go c.control(ctx)
		k := c.deployer(t, candidate("vllm:v2"), Options{})

		if err := k.Deploy(context.Background()); err != nil {
			t.Fatalf("Deploy: %v", err)
		}
		md := c.get(gvkModel, "serving", "glm")
		if img, _, _ := unstructured.NestedString(md.Object, "spec", "image"); img != "vllm:v2" {
			t.Errorf("deployed image = %q, want vllm:v2", img)
		}
		// Deploy returned only once the controller observed the new
		// generation: the parent's stale ReplicasReady did not count.
		og, _, _ := unstructured.NestedInt64(md.Object, "status", "observedGeneration")
		if md.GetGeneration() != 2 || og != 2 {
			t.Errorf("after Deploy generation %d observed %d, want 2 and 2", md.GetGeneration(), og)
		}
		var managers []string
		for _, f := range md.GetManagedFields() {
			managers = append(managers, f.Manager+"/"+string(f.Operation))
		}
		if !strings.Contains(strings.Join(managers, " "), FieldManager+"/Apply") {
			t.Errorf("managed fields %v: no server-side apply by %q", managers, FieldManager)
		}
		cm := c.get(gvkCM, "serving", "glm-flags")
		if cm == nil {
			t.Fatal("ConfigMap not created in the recipe's namespace")
		}
		if err := k.Ready(context.Background()); err != nil {
			t.Errorf("Ready after Deploy: %v", err)
		}
		if err := k.Deploy(context.Background()); err == nil {
			t.Error("a second Deploy without Rollback was accepted")
		}

		if err := k.Rollback(context.Background()); err != nil {
			t.Fatalf("Rollback: %v", err)
		}
		checkRestored(t, c)
		// A second Rollback has nothing left to do.
		before := c.countCalls("")
		if err := k.Rollback(context.Background()); err != nil || c.countCalls("") != before {
			t.Errorf("second Rollback: err %v, %d API calls", err, c.countCalls("")-before)
		}
	})
}

func TestKubernetesFailures(t *testing.T) {
	cases := []struct {
		name  string
		image string
		// setup changes the cluster or options before the run.
		setup func(c *cluster, o *Options)
		// body is the run between deploy and rollback; nil returns nil.
		body func(ctx context.Context) error
		// cancelAfter interrupts the run this long after it starts; 0 never.
		cancelAfter time.Duration
		want        []string // substrings of the error
		rolledBack  bool     // the cluster must be back as it was
	}{
		// The candidate never becomes ready: the deploy times out with the
		// condition's reason, and the parent is restored.
		{name: "readiness timeout", image: "vllm:broken", setup: func(c *cluster, o *Options) { o.ReadyTimeout = 3 * time.Minute },
			want: []string{"timed out", "ModelDeployment serving/glm", "ReplicasReady=False (CrashLoopBackOff"}, rolledBack: true},
		// Ready objects but a gateway that never lists the model.
		{name: "endpoint never serves", image: "vllm:v2", setup: func(c *cluster, o *Options) {
			o.ReadyTimeout = 3 * time.Minute
			c.served = "other-model"
		}, want: []string{"endpoint not serving", "not model"}},
		// The run fails midway: its error comes back and the parent is restored.
		{name: "failure mid-run", image: "vllm:v2", body: func(ctx context.Context) error { return errors.New("step 3 lost its lanes") },
			want: []string{"step 3 lost its lanes"}, rolledBack: true},
		// An interrupt while waiting for readiness: rollback still runs, on its
		// own context, and waits until the parent is ready again.
		{name: "interrupt during deploy", image: "vllm:v2", cancelAfter: 10 * time.Second,
			want: []string{"interrupted", "context canceled"}, rolledBack: true},
		// An interrupt during the run.
		{name: "interrupt during run", image: "vllm:v2", cancelAfter: 5 * time.Minute,
			body: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			want: []string{"context canceled"}, rolledBack: true},
		// The apply of the second object fails: the first is rolled back, and
		// nothing that was never applied is touched.
		{name: "apply fails", image: "vllm:v2", setup: func(c *cluster, o *Options) {
			c.fail["patch modeldeployments"] = apierrors.NewForbidden(schema.GroupResource{Resource: "modeldeployments"}, "glm", errors.New("RBAC"))
		}, want: []string{"apply ModelDeployment serving/glm", "forbidden"}, rolledBack: true},
		// The snapshot cannot be taken: nothing is applied.
		{name: "snapshot fails", image: "vllm:v2", setup: func(c *cluster, o *Options) {
			c.fail["get configmaps"] = errors.New("connection refused")
		}, want: []string{"snapshot ConfigMap serving/glm-flags", "nothing was applied"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, parentModel())
				var o Options
				if tc.setup != nil {
					tc.setup(c, &o)
				}
				cctx, stop := context.WithCancel(context.Background())
				defer stop()
				go c.control(cctx)
				k := c.deployer(t, candidate(tc.image), o)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tc.cancelAfter > 0 {
					time.AfterFunc(tc.cancelAfter, cancel)
				}
				body := tc.body
				if body == nil {
					body = func(context.Context) error { return nil }
				}
				err := Within(ctx, k, 20*time.Minute, func(ctx context.Context) error {
					c.mu.Lock()
					c.fail = map[string]error{} // the failure was the deploy's
					c.mu.Unlock()
					return body(ctx)
				})
				if err == nil {
					t.Fatal("Within returned no error")
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				var rb *RollbackError
				if errors.As(err, &rb) {
					t.Errorf("rollback failed: %v", rb)
				}
				if tc.rolledBack {
					checkRestored(t, c)
				}
				if tc.name == "snapshot fails" && c.countCalls("patch") > 0 {
					t.Errorf("%d applies after a failed snapshot", c.countCalls("patch"))
				}
			})
		})
	}
}

func TestKubernetesRollbackFailureListsWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, parentModel())
		cctx, stop := context.WithCancel(context.Background())
		defer stop()
		go c.control(cctx)
		k := c.deployer(t, candidate("vllm:v2"), Options{})
		err := Within(context.Background(), k, 5*time.Minute, func(context.Context) error {
			c.mu.Lock()
			c.fail["delete configmaps"] = errors.New("etcd unavailable")
			c.mu.Unlock()
			return nil
		})
		var rb *RollbackError
		if !errors.As(err, &rb) {
			t.Fatalf("Within error %v is not a RollbackError", err)
		}
		if len(rb.Left) != 1 || !strings.Contains(rb.Left[0], "ConfigMap serving/glm-flags: delete failed") {
			t.Errorf("Left = %q, want the ConfigMap's failed delete", rb.Left)
		}
		if !strings.Contains(err.Error(), "ROLLBACK FAILED") {
			t.Errorf("error is not loud: %v", err)
		}
		// The ModelDeployment was still restored.
		md := c.get(gvkModel, "serving", "glm")
		if img, _, _ := unstructured.NestedString(md.Object, "spec", "image"); img != "vllm:v1" {
			t.Errorf("ModelDeployment image after partial rollback = %q, want vllm:v1", img)
		}
		// The snapshot is kept, so a retry can finish the job.
		c.mu.Lock()
		c.fail = map[string]error{}
		c.mu.Unlock()
		if err := k.Rollback(context.Background()); err != nil {
			t.Fatalf("retried Rollback: %v", err)
		}
		checkRestored(t, c)
	})
}

func TestKubernetesUnknownKindAppliesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, parentModel())
		objs := append(candidate("vllm:v2"), obj(schema.GroupVersionKind{Group: "leaderworkerset.x-k8s.io", Version: "v1", Kind: "LeaderWorkerSet"}, "", "lws", nil))
		k := c.deployer(t, objs, Options{})
		err := Within(context.Background(), k, time.Minute, func(context.Context) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "LeaderWorkerSet") || !strings.Contains(err.Error(), "nothing was applied") {
			t.Errorf("error = %v, want the unknown kind named", err)
		}
		if n := c.countCalls(""); n != 0 {
			t.Errorf("%d API calls for a deploy with an unknown kind", n)
		}
	})
}

func TestReadiness(t *testing.T) {
	cond := func(status string, extra ...any) map[string]any {
		m := map[string]any{"type": "Available", "status": status}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	mk := func(kind string, gen int64, spec, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": kind,
			"metadata": map[string]any{"name": "x", "generation": gen}, "spec": spec, "status": status}}
		return u
	}
	cases := []struct {
		name string
		obj  *unstructured.Unstructured
		ok   bool
		why  string // substring of the reason when not ok
	}{
		// Condition True at the current generation.
		{"ready", mk("LeaderWorkerSet", 2, nil, map[string]any{"observedGeneration": int64(2), "conditions": []any{cond("True")}}), true, ""},
		// The controller has not seen the new spec: a True from before is stale.
		{"stale status", mk("LeaderWorkerSet", 3, nil, map[string]any{"observedGeneration": int64(2), "conditions": []any{cond("True")}}), false, "not 3 yet"},
		// The condition itself carries an older generation.
		{"stale condition", mk("LeaderWorkerSet", 3, nil, map[string]any{"conditions": []any{cond("True", "observedGeneration", int64(2))}}), false, "from generation 2"},
		// False, with reason and message.
		{"false", mk("LeaderWorkerSet", 1, nil, map[string]any{"conditions": []any{cond("False", "reason", "Pending", "message", "no GPUs")}}), false, "Available=False (Pending: no GPUs)"},
		// No condition yet.
		{"missing", mk("LeaderWorkerSet", 1, nil, map[string]any{}), false, "no Available condition"},
		// A Deployment mid-rollout: Available from the old pods.
		{"deployment rolling", mk("Deployment", 1, map[string]any{"replicas": int64(3)},
			map[string]any{"observedGeneration": int64(1), "updatedReplicas": int64(1), "availableReplicas": int64(3), "conditions": []any{cond("True")}}), false, "1 of 3 replicas updated"},
		// A Deployment fully rolled out.
		{"deployment done", mk("Deployment", 1, map[string]any{"replicas": int64(3)},
			map[string]any{"observedGeneration": int64(1), "updatedReplicas": int64(3), "availableReplicas": int64(3), "conditions": []any{cond("True")}}), true, ""},
	}
	for _, c := range cases {
		ok, why := Readiness(c.obj, "Available")
		if ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("%s: Readiness = %v, %q; want %v, %q", c.name, ok, why, c.ok, c.why)
		}
	}
}

func TestWithinRollsBackAfterSuccessToo(t *testing.T) {
	// A deployer that records calls: Within always rolls back, on a context
	// that is not the cancelled one.
	f := &fakeDeployer{}
	ctx, cancel := context.WithCancel(context.Background())
	err := Within(ctx, f, time.Minute, func(context.Context) error { cancel(); return nil })
	if err != nil || fmt.Sprint(f.calls) != "[deploy rollback]" || f.rollbackCtxErr != nil {
		t.Errorf("err %v calls %v rollback ctx err %v", err, f.calls, f.rollbackCtxErr)
	}
}

type fakeDeployer struct {
	calls          []string
	rollbackCtxErr error
}

func (f *fakeDeployer) Deploy(context.Context) error { f.calls = append(f.calls, "deploy"); return nil }
func (f *fakeDeployer) Ready(context.Context) error  { return nil }
func (f *fakeDeployer) Rollback(ctx context.Context) error {
	f.calls = append(f.calls, "rollback")
	f.rollbackCtxErr = ctx.Err()
	return nil
}
