package deploy

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/upload"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite deploy/*.yaml from `helm template` of deploy/helm/headroom")

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

const chartDir = "../../deploy/helm/headroom"

// rendered are the files in deploy/ that are the chart's output, with the
// helm template flags that make each and the comment above it.
var rendered = []struct {
	file, header string
	args         []string
}{
	{"job.yaml", `# headroom as a Kubernetes Job beside the gateway it measures: the Helm
# chart deploy/helm/headroom rendered with its defaults (a test checks they
# match; regenerate with go test ./internal/deploy -run TestRenderedDefaults -update).
#
#   kubectl create namespace headroom
#   kubectl apply -f deploy/rbac.yaml      # only when the run deploys recipes or discovers pods
#   kubectl apply -f deploy/job.yaml
#   kubectl -n headroom logs -f job/headroom-1
#
# With deploy/rbac.yaml, set automountServiceAccountToken: true in the Job:
# the token is what the deployer and discovery act with (the chart does
# this itself when it makes the RBAC). For another run, delete the Job (or
# rename it) and apply again; the runs stay on the claim.
#
# Edit the run file in the ConfigMap (the gateway Service, the model, the
# bar); or use the chart: helm install headroom deploy/helm/headroom -n headroom.
# Run directories go to the claim headroom-runs; read them back with
# deploy/runs-reader.yaml. See docs/kubernetes.md.
`, nil},
	{"rbac.yaml", `# What the recipe deployer (deploy.type: kubernetes) and metrics discovery
# need in the namespace of the recipe's objects and engines, here "serving",
# for the ServiceAccount headroom in "headroom": the chart's templates/rbac.yaml
# rendered with rbac.deployer.namespaces={serving} and
# rbac.discovery.namespaces={serving}. Keep only the kinds your recipes'
# manifests hold, and add any others they use.
`, []string{"--set", "rbac.deployer.namespaces={serving}", "--set", "rbac.discovery.namespaces={serving}", "--show-only", "templates/rbac.yaml"}},
	{"runs-reader.yaml", `# A pod that serves the run directories on the claim headroom-runs,
# read-only, once the Job is done (the chart's runsReader.enabled, in a
# revision with job.enabled=false). With a ReadWriteOnce claim, apply it
# only after the Job has finished: started beside it, it could take the
# claim on another node and keep the Job's pod from starting.
#
#   kubectl apply -f deploy/runs-reader.yaml
#   kubectl -n headroom wait --for=condition=Ready pod/headroom-runs
#   kubectl -n headroom exec headroom-runs -- headroom runs pack --root /work/runs > runs.tar.gz
#   kubectl -n headroom delete pod headroom-runs
`, []string{"--set", "job.enabled=false", "--set", "runsReader.enabled=true", "--show-only", "templates/runs-reader.yaml"}},
}

// typedDoc is one document decoded strictly into its Kubernetes type.
type typedDoc struct {
	kind, name string
	obj        any
}

// newTyped gives the Go type a kind is decoded into; the kinds of
// operators and controllers not in k8s.io/api have mirror types in
// examples_test.go.
func newTyped(kind string) any {
	switch kind {
	case "Namespace":
		return &corev1.Namespace{}
	case "ServiceAccount":
		return &corev1.ServiceAccount{}
	case "ConfigMap":
		return &corev1.ConfigMap{}
	case "Secret":
		return &corev1.Secret{}
	case "PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}
	case "Service":
		return &corev1.Service{}
	case "Pod":
		return &corev1.Pod{}
	case "Job":
		return &batchv1.Job{}
	case "Deployment":
		return &appsv1.Deployment{}
	case "Role":
		return &rbacv1.Role{}
	case "RoleBinding":
		return &rbacv1.RoleBinding{}
	case "ServiceMonitor":
		return &serviceMonitor{}
	case "PodMonitor":
		return &podMonitor{}
	case "LeaderWorkerSet":
		return &leaderWorkerSet{}
	case "InferenceService":
		return &inferenceService{}
	case "ModelDeployment":
		return &modelDeployment{}
	}
	return nil
}

// decodeStrict splits YAML documents on "---" lines and decodes each into
// its type, refusing unknown and duplicate fields.
func decodeStrict(name string, data []byte) ([]typedDoc, error) {
	var out []typedDoc
	for i, chunk := range splitDocs(data) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(chunk, &meta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %v", name, i+1, err)
		}
		typed := newTyped(meta.Kind)
		if typed == nil {
			return nil, fmt.Errorf("%s: document %d: kind %q has no Go type in this test", name, i+1, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(chunk, typed); err != nil {
			return nil, fmt.Errorf("%s: %s document %d: %v", name, meta.Kind, i+1, err)
		}
		var om struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		yaml.Unmarshal(chunk, &om)
		out = append(out, typedDoc{kind: meta.Kind, name: om.Metadata.Name, obj: typed})
	}
	return out, nil
}

func splitDocs(data []byte) [][]byte {
	var docs [][]byte
	for _, part := range strings.Split("\n"+string(data), "\n---") {
		body := false
		for _, line := range strings.Split(part, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				body = true
				break
			}
		}
		if body {
			docs = append(docs, []byte(strings.TrimPrefix(part, "\n")))
		}
	}
	return docs
}

func find[T any](objs []typedDoc, kind string) []*T {
	var out []*T
	for _, o := range objs {
		if o.kind == kind {
			out = append(out, o.obj.(*T))
		}
	}
	return out
}

func kindsOf(objs []typedDoc) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.kind)
	}
	return out
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkRelease checks what must hold across the objects of one render:
// the Job's run file, volumes, key and metrics agree with each other and
// with the Service, monitors, reader pod and RBAC beside them.
func checkRelease(t *testing.T, objs []typedDoc, appVersion string) {
	t.Helper()
	jobs := find[batchv1.Job](objs, "Job")
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs, want 1 (kinds %v)", len(jobs), kindsOf(objs))
	}
	job := jobs[0]
	pod := job.Spec.Template
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Error("the Job may retry: a retry would send the load again")
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("the Job does not require a non-root user")
	}
	if sas := find[corev1.ServiceAccount](objs, "ServiceAccount"); len(sas) == 1 && pod.Spec.ServiceAccountName != sas[0].Name {
		t.Errorf("the Job runs as %q, not the ServiceAccount %q", pod.Spec.ServiceAccountName, sas[0].Name)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("the Job has %d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	repo, tag, _ := strings.Cut(c.Image[strings.LastIndex(c.Image, "/")+1:], ":")
	if tag == "" || tag == "latest" || appVersion != "" && tag != appVersion {
		t.Errorf("image %s (%s): want a pinned tag, the chart's appVersion %s", c.Image, repo, appVersion)
	}
	var port int32
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			port = p.ContainerPort
		}
	}
	if want := []string{"run", "-f", "/config/run.yaml", "--metrics-addr", fmt.Sprintf(":%d", port)}; port == 0 || !slices.Equal(c.Args, want) {
		t.Errorf("args %v, want %v (the metrics port named metrics)", c.Args, want)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}

	// The run file: valid, writing where the runs volume is.
	cm := volumes["config"].ConfigMap
	if cm == nil || mounts["config"] != "/config" {
		t.Fatal("no ConfigMap mounted at /config")
	}
	var runYAML string
	for _, m := range find[corev1.ConfigMap](objs, "ConfigMap") {
		if m.Name == cm.Name {
			runYAML = m.Data["run.yaml"]
		}
	}
	cfg, up := parseRunFile(t, runYAML)
	if cfg.Output != mounts["runs"] {
		t.Errorf("the run file writes to %q, the runs volume is at %q", cfg.Output, mounts["runs"])
	}
	if claim := volumes["runs"].PersistentVolumeClaim; claim != nil {
		for _, pvc := range find[corev1.PersistentVolumeClaim](objs, "PersistentVolumeClaim") {
			if pvc.Name == claim.ClaimName && pvc.Annotations["helm.sh/resource-policy"] != "keep" {
				t.Errorf("the claim %s goes with helm uninstall, and the runs with it", pvc.Name)
			}
		}
	} else {
		t.Error("run directories are not on a PersistentVolumeClaim: they go with the pod")
	}

	// The API key and the bucket's keys come from Secrets, under the names
	// the run file reads.
	env := map[string]*corev1.EnvVarSource{}
	for _, e := range c.Env {
		if e.Value != "" {
			t.Errorf("env %s has a literal value; secrets come from a Secret", e.Name)
		}
		env[e.Name] = e.ValueFrom
	}
	if k := cfg.Recipe.APIKeyEnv; k != "" && (env[k] == nil || env[k].SecretKeyRef == nil) {
		t.Errorf("recipe.api_key_env is %s, which the pod does not get from a Secret", k)
	}
	if up.S3 != nil && (up.S3.AccessKeyEnv != "" || up.S3.SecretKeyEnv != "") {
		for _, k := range []string{orDefault(up.S3.AccessKeyEnv, upload.DefaultAccessKeyEnv), orDefault(up.S3.SecretKeyEnv, upload.DefaultSecretKeyEnv)} {
			if env[k] == nil || env[k].SecretKeyRef == nil {
				t.Errorf("report.upload reads $%s, which the pod does not get from a Secret", k)
			}
		}
	}

	// headroom's own metrics: the Service and monitors reach the port.
	for _, svc := range find[corev1.Service](objs, "Service") {
		labels := pod.Labels
		if job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion {
			labels = withIndex(labels, "0") // Kubernetes labels an Indexed Job's pods with their index
		}
		if !matches(svc.Spec.Selector, labels) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
			t.Errorf("Service %s does not reach the Job's metrics port (selector %v, pod labels %v)", svc.Name, svc.Spec.Selector, pod.Labels)
		}
		for _, sm := range find[serviceMonitor](objs, "ServiceMonitor") {
			if !matches(sm.Spec.Selector.MatchLabels, svc.Labels) || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name {
				t.Errorf("ServiceMonitor %s does not select Service %s's port", sm.Name, svc.Name)
			}
		}
	}
	for _, pm := range find[podMonitor](objs, "PodMonitor") {
		if !matches(pm.Spec.Selector.MatchLabels, pod.Labels) || len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port != "metrics" {
			t.Errorf("PodMonitor %s does not select the Job's pod and port", pm.Name)
		}
	}

	// The runs reader mounts the same claim, read-only, where the run file writes.
	for _, p := range find[corev1.Pod](objs, "Pod") {
		checkReader(t, p, volumes["runs"], cfg.Output)
	}
	checkRBAC(t, objs, pod.Spec.ServiceAccountName, job.Namespace)
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// parseRunFile parses a run file as headroom would, report.upload apart
// (decoded strictly on its own).
func parseRunFile(t *testing.T, runYAML string) (config.Run, upload.Config) {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(runYAML), &m); err != nil {
		t.Fatalf("run file: %v", err)
	}
	var up upload.Config
	if rep, ok := m["report"].(map[string]any); ok {
		b, _ := yaml.Marshal(rep["upload"])
		if err := yaml.UnmarshalStrict(b, &up); err != nil {
			t.Errorf("report.upload: %v", err)
		}
		if err := up.Validate("report.upload"); err != nil {
			t.Error(err)
		}
		delete(m, "report")
	}
	b, _ := yaml.Marshal(m)
	cfg, err := config.Parse(b, "run.yaml")
	if err != nil {
		t.Fatalf("the Job's run file is invalid: %v\n%s", err, runYAML)
	}
	return cfg, up
}

func checkReader(t *testing.T, p *corev1.Pod, runs corev1.Volume, output string) {
	t.Helper()
	if len(p.Spec.Containers) != 1 || len(p.Spec.Volumes) != 1 {
		t.Fatalf("reader pod %s: %d containers, %d volumes", p.Name, len(p.Spec.Containers), len(p.Spec.Volumes))
	}
	c, v := p.Spec.Containers[0], p.Spec.Volumes[0]
	if v.PersistentVolumeClaim == nil || runs.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != runs.PersistentVolumeClaim.ClaimName || !v.PersistentVolumeClaim.ReadOnly {
		t.Errorf("reader pod %s does not mount the runs claim read-only", p.Name)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != output || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("reader pod %s mounts %v, want %s read-only", p.Name, c.VolumeMounts, output)
	}
	if len(c.Args) < 4 || !slices.Equal(c.Args[:4], []string{"runs", "serve", "--root", output}) {
		t.Errorf("reader pod %s runs %v, want runs serve --root %s", p.Name, c.Args, output)
	}
}

// checkRBAC: each deployer Role grants every verb the kubernetes deployer
// uses on every kind the example recipes deploy, Modelplane's included,
// and each binding names the Job's ServiceAccount.
func checkRBAC(t *testing.T, objs []typedDoc, sa, ns string) {
	t.Helper()
	roles := map[string]*rbacv1.Role{}
	for _, r := range find[rbacv1.Role](objs, "Role") {
		roles[r.Namespace+"/"+r.Name] = r
		if !strings.HasSuffix(r.Name, "-deployer") {
			continue
		}
		granted := map[string]bool{}
		for _, rule := range r.Rules {
			for _, v := range []string{"get", "create", "patch", "update", "delete"} {
				if !slices.Contains(rule.Verbs, v) {
					t.Errorf("Role %s: rule %v lacks verb %q, which the deployer uses", r.Name, rule.Resources, v)
				}
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					granted[g+"/"+res] = true
				}
			}
		}
		for _, want := range []string{"apps/deployments", "leaderworkerset.x-k8s.io/leaderworkersets", "serving.kserve.io/inferenceservices", "modelplane.ai/modeldeployments", "/services"} {
			if !granted[want] {
				t.Errorf("Role %s/%s does not cover %s", r.Namespace, r.Name, want)
			}
		}
	}
	for _, b := range find[rbacv1.RoleBinding](objs, "RoleBinding") {
		if roles[b.Namespace+"/"+b.RoleRef.Name] == nil {
			t.Errorf("RoleBinding %s/%s names no Role of the release", b.Namespace, b.Name)
		}
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa || b.Subjects[0].Namespace != ns {
			t.Errorf("RoleBinding %s/%s subjects %v, want the ServiceAccount %s/%s", b.Namespace, b.Name, b.Subjects, ns, sa)
		}
	}
}

func appVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AppVersion == "" || c.AppVersion == "latest" {
		t.Fatalf("Chart.yaml appVersion %q (%v): want the release the image is tagged with", c.AppVersion, err)
	}
	return c.AppVersion
}

// TestChart lints the chart and renders it with its defaults and with
// every option on; each render decodes strictly and holds together.
func TestChart(t *testing.T) {
	if out, err := helm(t, "lint", "--strict", chartDir); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	v := appVersion(t)

	objs, err := decodeStrict("helm template (defaults)", template(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kindsOf(objs), []string{"ServiceAccount", "ConfigMap", "PersistentVolumeClaim", "Service", "Job"}; !slices.Equal(got, want) {
		t.Errorf("default kinds %v, want %v", got, want)
	}
	checkRelease(t, objs, v)

	all := template(t, "--set", "namespace.create=true", "--set", "apiKey.existingSecret=gateway-key",
		"--set", "rbac.deployer.namespaces={serving,modelplane}", "--set", "rbac.discovery.namespaces={serving}",
		"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.podMonitor.enabled=true",
		"--set", "runsReader.enabled=true", "--set", "persistence.accessModes={ReadWriteMany}", "--set", "upload.s3.bucket=bench", "--set", "upload.s3.endpoint=http://minio.storage:9000",
		"--set", "upload.s3.prefix=headroom", "--set", "upload.credentialsSecret=s3-keys")
	objs, err = decodeStrict("helm template (all options)", all)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Namespace", "ServiceMonitor", "PodMonitor", "Pod", "Role", "RoleBinding"} {
		if !slices.Contains(kindsOf(objs), want) {
			t.Errorf("with every option on, no %s (kinds %v)", want, kindsOf(objs))
		}
	}
	if n := len(find[rbacv1.Role](objs, "Role")); n != 3 {
		t.Errorf("%d Roles, want a deployer Role in serving and modelplane and a discovery Role in serving", n)
	}
	checkRelease(t, objs, v)
	cfg, up := parseRunFile(t, find[corev1.ConfigMap](objs, "ConfigMap")[0].Data["run.yaml"])
	if cfg.Recipe.APIKeyEnv != "HEADROOM_API_KEY" || up.S3 == nil || up.S3.Bucket != "bench" {
		t.Errorf("the run file does not name the key's variable (%q) or the bucket (%+v)", cfg.Recipe.APIKeyEnv, up.S3)
	}

	// A key given as a value becomes a Secret the pod reads.
	objs, err = decodeStrict("helm template (apiKey.value)", template(t, "--set", "apiKey.value=sk-test-123"))
	if err != nil {
		t.Fatal(err)
	}
	if s := find[corev1.Secret](objs, "Secret"); len(s) != 1 || string(s[0].Data["api-key"]) != "sk-test-123" {
		t.Errorf("apiKey.value made Secrets %v", s)
	}
	checkRelease(t, objs, v)
}

// TestRenderedDefaults: the manifests in deploy/ are the chart's output,
// byte for byte below their comment; -update rewrites them.
func TestRenderedDefaults(t *testing.T) {
	for _, r := range rendered {
		want := r.header + string(template(t, r.args...))
		path := filepath.Join("../../deploy", r.file)
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("deploy/%s is not what the chart renders: go test ./internal/deploy -run TestRenderedDefaults -update", r.file)
		}
	}
}

// TestShippedManifests decodes deploy/*.yaml strictly, without helm, and
// checks they hold together as the chart's renders must.
func TestShippedManifests(t *testing.T) {
	var objs []typedDoc
	for _, r := range rendered {
		b, err := os.ReadFile(filepath.Join("../../deploy", r.file))
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeStrict("deploy/"+r.file, b)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	if got, want := kindsOf(objs), []string{"ServiceAccount", "ConfigMap", "PersistentVolumeClaim", "Service", "Job", "Role", "Role", "RoleBinding", "RoleBinding", "Pod"}; !slices.Equal(got, want) {
		t.Errorf("kinds %v, want %v", got, want)
	}
	checkRelease(t, objs, appVersion(t))
}
