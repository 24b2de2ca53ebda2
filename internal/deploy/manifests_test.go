package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDecodeManifests(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		kinds []string // kinds decoded, in order
		err   string   // substring of the error; "" for none
	}{
		// Several documents, with empty ones and comments skipped.
		{"multi", "---\n# leading comment\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b}\n", []string{"ConfigMap", "Deployment"}, ""},
		// A List is expanded.
		{"list", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n", []string{"Service", "ConfigMap"}, ""},
		// No name: the document is named in the error.
		{"no name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", nil, "m.yaml: document 1: object lacks metadata.name"},
		// generateName cannot be rolled back.
		{"generateName", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, generateName: a-}\n", nil, "generateName"},
		// Broken YAML in the second document.
		{"bad yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [\n", nil, "document 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := DecodeManifests([]byte(c.yaml), "m.yaml")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(objs); !slices.Equal(got, c.kinds) {
				t.Errorf("kinds = %v, want %v", got, c.kinds)
			}
		})
	}
	if _, err := ReadManifests(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("ReadManifests of a missing file returned no error")
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(empty, []byte("# nothing\n"), 0o644)
	if _, err := ReadManifests(empty); err == nil || !strings.Contains(err.Error(), "no objects") {
		t.Errorf("ReadManifests of an empty file: %v", err)
	}
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind())
	}
	return out
}

// TestShippedManifests decodes deploy/job.yaml and deploy/rbac.yaml, checks
// their kinds, that the Job's run file is a valid run file, and that the
// Role grants every verb the kubernetes deployer uses.
func TestShippedManifests(t *testing.T) {
	job, err := ReadManifests("../../deploy/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(job), []string{"ServiceAccount", "ConfigMap", "Job"}; !slices.Equal(got, want) {
		t.Errorf("job.yaml kinds = %v, want %v", got, want)
	}
	runYAML, _, _ := unstructured.NestedString(job[1].Object, "data", "run.yaml")
	if _, err := config.Parse([]byte(runYAML), "deploy/job.yaml run.yaml"); err != nil {
		t.Errorf("the Job's run file is invalid: %v", err)
	}
	containers, _, _ := unstructured.NestedSlice(job[2].Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("Job has %d containers, want 1", len(containers))
	}
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if !slices.Equal(args[:3], []string{"run", "-f", "/config/run.yaml"}) {
		t.Errorf("Job args = %v, want run -f /config/run.yaml ...", args)
	}
	sa, _, _ := unstructured.NestedString(job[2].Object, "spec", "template", "spec", "serviceAccountName")
	if sa != job[0].GetName() {
		t.Errorf("Job runs as %q, not the ServiceAccount %q", sa, job[0].GetName())
	}
	nonRoot, _, _ := unstructured.NestedBool(job[2].Object, "spec", "template", "spec", "securityContext", "runAsNonRoot")
	if !nonRoot {
		t.Error("Job does not require a non-root user")
	}

	rbac, err := ReadManifests("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The deployer's Role and binding, then metrics discovery's.
	if got, want := kinds(rbac), []string{"Role", "RoleBinding", "Role", "RoleBinding"}; !slices.Equal(got, want) {
		t.Fatalf("rbac.yaml kinds = %v, want %v", got, want)
	}
	discovery, _, _ := unstructured.NestedSlice(rbac[2].Object, "rules")
	if len(discovery) != 1 {
		t.Errorf("metrics discovery's Role has %d rules, want 1", len(discovery))
	} else {
		res, _, _ := unstructured.NestedStringSlice(discovery[0].(map[string]any), "resources")
		verbs, _, _ := unstructured.NestedStringSlice(discovery[0].(map[string]any), "verbs")
		if !slices.Equal(res, []string{"endpointslices"}) || !slices.Equal(verbs, []string{"get", "list", "watch"}) {
			t.Errorf("metrics discovery's Role: %v on %v, want get/list/watch on endpointslices", verbs, res)
		}
	}
	rules, _, _ := unstructured.NestedSlice(rbac[0].Object, "rules")
	resources := map[string]bool{}
	for _, r := range rules {
		m := r.(map[string]any)
		verbs, _, _ := unstructured.NestedStringSlice(m, "verbs")
		for _, v := range []string{"get", "create", "patch", "update", "delete"} {
			if !slices.Contains(verbs, v) {
				t.Errorf("rule %v lacks verb %q, which the deployer uses", m["resources"], v)
			}
		}
		res, _, _ := unstructured.NestedStringSlice(m, "resources")
		for _, x := range res {
			resources[x] = true
		}
	}
	for _, want := range []string{"deployments", "leaderworkersets", "inferenceservices"} {
		if !resources[want] {
			t.Errorf("Role does not cover %s", want)
		}
	}
	subjects, _, _ := unstructured.NestedSlice(rbac[1].Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != job[0].GetName() ||
		subjects[0].(map[string]any)["namespace"] != job[0].GetNamespace() {
		t.Errorf("RoleBinding subjects %v do not name the Job's ServiceAccount", subjects)
	}
}
