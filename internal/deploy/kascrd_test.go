package deploy

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var gvrCRD = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdFromXRD is the CRD Crossplane serves for a namespaced v2 composite
// resource definition: the XRD's names, scope, versions, printer columns
// and schema, a status subresource, and the fields Crossplane adds to
// every composite resource (spec.crossplane, status.conditions and
// status.crossplane), here as open objects.
func crdFromXRD(xrd *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	spec, _, _ := unstructured.NestedMap(xrd.Object, "spec")
	names, _, _ := unstructured.NestedMap(spec, "names")
	kind, _ := names["kind"].(string)
	if kind == "" {
		return nil, fmt.Errorf("XRD %s names no kind", xrd.GetName())
	}
	names["listKind"], names["singular"] = kind+"List", strings.ToLower(kind)
	versions, _, _ := unstructured.NestedSlice(spec, "versions")
	var out []any
	for _, v := range versions {
		v := v.(map[string]any)
		sch, _, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema")
		open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		unstructured.SetNestedField(sch, open, "properties", "spec", "properties", "crossplane")
		unstructured.SetNestedField(sch, "object", "properties", "status", "type")
		unstructured.SetNestedField(sch, open, "properties", "status", "properties", "crossplane")
		unstructured.SetNestedField(sch, map[string]any{
			"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []any{"type"},
			"items": map[string]any{"type": "object", "required": []any{"lastTransitionTime", "reason", "status", "type"},
				"properties": map[string]any{
					"type": map[string]any{"type": "string"}, "status": map[string]any{"type": "string"},
					"reason": map[string]any{"type": "string"}, "message": map[string]any{"type": "string"},
					"lastTransitionTime": map[string]any{"type": "string", "format": "date-time"},
					"observedGeneration": map[string]any{"type": "integer", "format": "int64"},
				}},
		}, "properties", "status", "properties", "conditions")
		sub, _, _ := unstructured.NestedMap(v, "subresources")
		if sub == nil {
			sub = map[string]any{}
		}
		sub["status"] = map[string]any{}
		ver := map[string]any{"name": v["name"], "served": v["served"], "storage": v["referenceable"],
			"schema": map[string]any{"openAPIV3Schema": sch}, "subresources": sub}
		if c, ok := v["additionalPrinterColumns"]; ok {
			ver["additionalPrinterColumns"] = c
		}
		out = append(out, ver)
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": xrd.GetName()},
		"spec":     map[string]any{"group": spec["group"], "names": names, "scope": spec["scope"], "versions": out},
	}}
	return crd, nil
}

var crdsOnce sync.Once

// installCRDs applies testdata/crds (KServe's, LeaderWorkerSet's and
// Modelplane's, as published; see its README) once per server and waits
// until each is Established and served.
func (s *kasServer) installCRDs(t *testing.T) {
	t.Helper()
	var err error
	crdsOnce.Do(func() { err = s.applyCRDs() })
	if err != nil {
		t.Fatal(err)
	}
}

func (s *kasServer) applyCRDs() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	files, _ := filepath.Glob("testdata/crds/*.yaml")
	if len(files) != 3 {
		return fmt.Errorf("testdata/crds holds %d CRD files, want 3", len(files))
	}
	objs, err := ReadManifests(files...)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetKind() == "CompositeResourceDefinition" {
			if o, err = crdFromXRD(o); err != nil {
				return err
			}
		}
		if _, err := s.dynamic.Resource(gvrCRD).Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "headroom-test", Force: true}); err != nil {
			return fmt.Errorf("apply CRD %s: %w", o.GetName(), err)
		}
		err := poll(ctx, func() error {
			got, err := s.dynamic.Resource(gvrCRD).Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ok, why := Readiness(got, "Established"); !ok {
				return fmt.Errorf("CRD %s: %s", o.GetName(), why)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// Established comes a moment before discovery lists the kind.
	return poll(ctx, func() error {
		m, err := NewDiscovery(s.config)
		if err != nil {
			return err
		}
		for _, gvk := range []schema.GroupVersionKind{
			{Group: "serving.kserve.io", Version: "v1beta1", Kind: "InferenceService"},
			{Group: "leaderworkerset.x-k8s.io", Version: "v1", Kind: "LeaderWorkerSet"},
			{Group: "modelplane.ai", Version: "v1alpha1", Kind: "ModelDeployment"},
		} {
			if _, _, err := m.Resource(ctx, gvk); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestExamplesOnAPIServer applies every example manifest to a real API
// server with the CRDs of Modelplane, LeaderWorkerSet and KServe, through
// the deployer's own discovery mapper and with strict field validation, so
// a field a schema does not hold (which the server would otherwise drop)
// is an error; each LeaderWorkerSet pod template is checked by the
// server's PodTemplate validation; Modelplane's CEL rules refuse an engine
// container not named "engine"; and a status written as each controller
// would reads ready by the deployer's rule, through what each schema keeps.
func TestExamplesOnAPIServer(t *testing.T) {
	s := realAPIServer(t)
	s.installCRDs(t)
	ns := s.namespaceLabelled(t, "llm", nil)
	ctx := within(t)
	mapper, err := NewDiscovery(s.config)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../examples/manifests/*.yaml")
	if len(files) < 5 {
		t.Fatalf("%d example manifests, want 5", len(files))
	}
	seen := map[string]bool{}
	for _, f := range files {
		objs, err := ReadManifests(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			gvr, namespaced, err := mapper.Resource(ctx, o.GroupVersionKind())
			if err != nil || !namespaced {
				t.Errorf("%s: %s: %v (namespaced %v)", f, o.GetKind(), err, namespaced)
				continue
			}
			o.SetNamespace(ns)
			res := s.dynamic.Resource(gvr).Namespace(ns)
			applied, err := res.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
			if err != nil {
				t.Errorf("%s: apply %s %s: %v", filepath.Base(f), o.GetKind(), o.GetName(), err)
				continue
			}
			// Strict validation refuses what a structural schema would prune.
			if _, err := res.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
			}
			seen[o.GetKind()] = true
			if o.GetKind() == "LeaderWorkerSet" {
				s.checkPodTemplates(t, ns, applied)
			}
			if cond := ReadyConditions[o.GetKind()]; cond != "" {
				s.markReady(t, res, applied, cond)
			}
		}
	}
	for _, k := range []string{"ModelDeployment", "LeaderWorkerSet", "InferenceService", "Deployment", "Service"} {
		if !seen[k] {
			t.Errorf("no example %s was applied", k)
		}
	}

	// Modelplane's CEL rules are live: a container not named engine is refused.
	md, err := ReadManifests("../../examples/manifests/5-modelplane.md.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := md[0].DeepCopy()
	bad.SetNamespace(ns)
	bad.SetName("renamed-engine")
	engines, _, _ := unstructured.NestedSlice(bad.Object, "spec", "template", "spec", "engines")
	members := engines[0].(map[string]any)["members"].([]any)
	containers, _, _ := unstructured.NestedSlice(members[0].(map[string]any), "template", "spec", "containers")
	containers[0].(map[string]any)["name"] = "vllm"
	unstructured.SetNestedSlice(members[0].(map[string]any), containers, "template", "spec", "containers")
	unstructured.SetNestedSlice(bad.Object, engines, "spec", "template", "spec", "engines")
	gvr, _, _ := mapper.Resource(ctx, bad.GroupVersionKind())
	if _, err := s.dynamic.Resource(gvr).Namespace(ns).Apply(ctx, bad.GetName(), bad, metav1.ApplyOptions{FieldManager: FieldManager}); err == nil || !strings.Contains(err.Error(), "must be named 'engine'") {
		t.Errorf("a ModelDeployment whose container is not named engine: %v, want Modelplane's CEL rule to refuse it", err)
	}
}

// checkPodTemplates submits each pod template of a LeaderWorkerSet as a
// PodTemplate, dry run, for the server's own validation (the CRD fixture
// leaves the templates' spec open; see testdata/crds/README.md).
func (s *kasServer) checkPodTemplates(t *testing.T, ns string, lws *unstructured.Unstructured) {
	t.Helper()
	for _, which := range []string{"leaderTemplate", "workerTemplate"} {
		tmpl, found, _ := unstructured.NestedMap(lws.Object, "spec", "leaderWorkerTemplate", which)
		if !found {
			continue
		}
		pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: lws.GetName() + "-" + strings.ToLower(which)}}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt.Template); err != nil {
			t.Errorf("LeaderWorkerSet %s %s: %v", lws.GetName(), which, err)
			continue
		}
		if _, err := s.client.CoreV1().PodTemplates(ns).Create(within(t), pt, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
			t.Errorf("LeaderWorkerSet %s %s is not a valid pod template: %v", lws.GetName(), which, err)
		}
	}
}

// markReady writes, through the status subresource, the status the kind's
// controller reports when the object is ready for its generation, and
// checks the deployer reads it ready from what the server kept.
func (s *kasServer) markReady(t *testing.T, res dynamic.ResourceInterface, u *unstructured.Unstructured, cond string) {
	t.Helper()
	ctx := within(t)
	u = u.DeepCopy()
	now := time.Now().UTC().Format(time.RFC3339)
	u.Object["status"] = map[string]any{
		"observedGeneration": u.GetGeneration(),
		"replicas":           int64(1), "updatedReplicas": int64(1), "availableReplicas": int64(1), "readyReplicas": int64(1),
		"conditions": []any{map[string]any{"type": cond, "status": "True", "reason": "Ready", "message": "written by the test",
			"lastTransitionTime": now, "observedGeneration": u.GetGeneration()}},
	}
	if u.GetKind() == "ModelDeployment" {
		u.Object["status"].(map[string]any)["replicas"] = map[string]any{"total": int64(1), "ready": int64(1)}
	}
	if _, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Errorf("%s %s: write status: %v", u.GetKind(), u.GetName(), err)
		return
	}
	got, err := res.Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := Readiness(got, cond); !ok {
		t.Errorf("%s %s: a ready status reads not ready: %s (status kept: %v)", u.GetKind(), u.GetName(), why, got.Object["status"])
	}
	if _, kept, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration"); !kept {
		t.Logf("%s: the schema has no status.observedGeneration (the server dropped it); readiness rests on the condition's own observedGeneration", u.GetKind())
	}
}
