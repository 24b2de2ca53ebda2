package deploy_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/deploy"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// controller marks each Deployment in ns available once it sees a new
// generation, through the status subresource, as the Deployment
// controller would once its pods are ready (there is no kubelet), until
// ctx is done.
func controller(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) {
	for ctx.Err() == nil {
		l, err := client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range l.Items {
				d := &l.Items[i]
				if d.Status.ObservedGeneration == d.Generation {
					continue
				}
				n := int32(1)
				if d.Spec.Replicas != nil {
					n = *d.Spec.Replicas
				}
				now := metav1.Now()
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
					Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
						Message: "written by the test", LastUpdateTime: now, LastTransitionTime: now}}}
				if _, err := client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
					t.Errorf("controller: %v", err)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func deployment(ns, image string) *appsv1.Deployment {
	labels := map[string]string{"app": "engine"}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "engine", Namespace: ns, Labels: map[string]string{"owner": "platform"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "engine", Image: image, Args: []string{"--max-num-seqs", "256"}}}}}},
	}
}

// runFile is the built-in simulated run, shortened (one step of 4
// sessions on the virtual clock), whose recipe is deployed by the
// kubernetes deployer from manifests.
func runFile(t *testing.T, dir, kubeconfig, ns, manifests string, promote bool) config.Run {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(config.DefaultYAML(), &m); err != nil {
		t.Fatal(err)
	}
	recipe := m["recipe"].(map[string]any)
	recipe["deploy"] = map[string]any{"type": "kubernetes", "poll_s": 0.2, "ready_timeout_s": 120, "rollback_timeout_s": 120,
		"kubernetes": map[string]any{"manifests": []any{manifests}, "namespace": ns, "kubeconfig": kubeconfig}}
	sweep := m["sweep"].(map[string]any)
	sweep["ladder"], sweep["target"], sweep["step_s"], sweep["warmup_s"], sweep["repeat"] = []any{4}, 4, 240, 60, false
	delete(sweep, "stress")
	m["evals"] = map[string]any{"suites": []any{}}
	m["time_scale"], m["output"] = "virtual", filepath.Join(dir, "runs")
	if promote {
		// A bar the short step clears, so the target passes and promotes:
		// what is tested is the promote, not the verdict.
		m["deploy"] = map[string]any{"promote": "on_target"}
		m["bar"] = map[string]any{"ttft_p90_s": 30, "interactivity_p90_tps": 1, "error_rate": 0.5}
	}
	b, _ := yaml.Marshal(m)
	cfg, err := config.Parse(b, "run.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return cfg
}

func phases(sum report.Summary) map[string]string {
	out := map[string]string{}
	for _, p := range sum.Phases {
		out[p.Name] = p.Status
	}
	return out
}

// TestHeadroomRunOnAPIServer runs headroom (rig.Run, what `headroom run`
// does) with deploy.type kubernetes against a real API server: the
// candidate Deployment and a new ConfigMap go up by server-side apply
// over production's Deployment, the run waits until the Deployment is
// available (the test writes the status the Deployment controller would),
// sweeps the simulated gateway, and rolls back to production: the
// Deployment restored, the ConfigMap deleted. A second run with
// deploy.promote on_target keeps the candidate instead, labelled by the
// same server-side apply, without a new generation.
func TestHeadroomRunOnAPIServer(t *testing.T) {
	kubeconfig, client := deploy.RealAPIServer(t)
	ns := deploy.NewNamespace(t, "run")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	stopped := make(chan struct{})
	go func() { controller(ctx, t, client, ns); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	if _, err := client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "vllm/vllm-openai:v0.10.0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cand := deployment(ns, "vllm/vllm-openai:v0.11.0")
	cand.Labels = nil
	cand.Spec.Template.Spec.Containers[0].Args = []string{"--max-num-seqs", "512"}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "engine-flags"},
		Data: map[string]string{"flags": "--max-num-seqs=512"}}
	var manifest bytes.Buffer
	for _, o := range []any{cm, cand} {
		b, _ := yaml.Marshal(o)
		manifest.WriteString("---\n")
		manifest.Write(b)
	}
	manifests := filepath.Join(dir, "candidate.yaml")
	if err := os.WriteFile(manifests, manifest.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	// A run that rolls back.
	var progress bytes.Buffer
	sum, err := rig.Run(ctx, rig.Options{Config: runFile(t, dir, kubeconfig, ns, manifests, false), Progress: &progress})
	if err != nil && sum.Target == nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	if p := phases(sum); p[rig.PhaseRollout] != "ok" || p[rig.PhaseRollback] != "ok" {
		t.Fatalf("phases %v, want rollout and rollback ok\n%s", p, progress.String())
	}
	for _, want := range []string{"deploy: applied ConfigMap " + ns + "/engine-flags", "deploy: applied Deployment " + ns + "/engine",
		"deploy: rollback: restored Deployment " + ns + "/engine", "deploy: rollback: deleted ConfigMap " + ns + "/engine-flags"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	d, err := client.AppsV1().Deployments(ns).Get(ctx, "engine", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "vllm/vllm-openai:v0.10.0" || strings.Join(c.Args, " ") != "--max-num-seqs 256" || d.Labels["owner"] != "platform" {
		t.Errorf("after rollback the Deployment runs %s %v labels %v, want production's v0.10.0 --max-num-seqs 256, owner=platform", c.Image, c.Args, d.Labels)
	}
	if _, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "engine-flags", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after rollback the candidate's ConfigMap is still there: %v", err)
	}

	// A run that promotes: the candidate stays, labelled with the run.
	progress.Reset()
	sum, err = rig.Run(ctx, rig.Options{Config: runFile(t, dir, kubeconfig, ns, manifests, true), Progress: &progress})
	if err != nil && sum.Target == nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	p := phases(sum)
	if sum.Target == nil || p[rig.PhaseRollout] != "ok" {
		t.Fatalf("promote run: target %v, phases %v\n%s", sum.Target, p, progress.String())
	}
	d, err = client.AppsV1().Deployments(ns).Get(ctx, "engine", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p[rig.PhasePromote] != "ok" {
		t.Fatalf("the target (%s) did not promote: phases %v\n%s", sum.Target.Verdict, p, progress.String())
	}
	want := deploy.LabelValue(strings.Join(strings.Split(filepath.ToSlash(sum.RunDir), "/")[len(strings.Split(filepath.ToSlash(sum.RunDir), "/"))-2:], "/"))
	if got := d.Labels[deploy.PromotedLabel]; got == "" || got != want {
		t.Errorf("promoted Deployment label %s=%q, want %q", deploy.PromotedLabel, got, want)
	}
	if c := d.Spec.Template.Spec.Containers[0]; c.Image != "vllm/vllm-openai:v0.11.0" {
		t.Errorf("promoted Deployment runs %s, want the candidate", c.Image)
	}
	if d.Status.ObservedGeneration != d.Generation {
		t.Errorf("the promote label started a rollout: generation %d, observed %d", d.Generation, d.Status.ObservedGeneration)
	}
	if _, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "engine-flags", metav1.GetOptions{}); err != nil {
		t.Errorf("the promoted candidate's ConfigMap: %v", err)
	}
	managers := map[string]bool{}
	for _, f := range d.ManagedFields {
		managers[f.Manager+"/"+string(f.Operation)] = true
	}
	if !managers[deploy.FieldManager+"/Apply"] {
		t.Errorf("the promoted Deployment's field managers %v lack %s's apply", managers, deploy.FieldManager)
	}
}
