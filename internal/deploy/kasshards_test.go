package deploy

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// completeIndexedJob writes the status the Job controller would once
// every pod of an Indexed Job has exited 0: all indexes succeeded,
// SuccessCriteriaMet and Complete.
func (s *kasServer) completeIndexedJob(t *testing.T, ns, name string) {
	t.Helper()
	ctx := within(t)
	job, err := s.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := *job.Spec.Completions
	start := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	end := metav1.NewTime(time.Now().Truncate(time.Second))
	job.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &end, Succeeded: n,
		CompletedIndexes: "0-" + strconv.Itoa(int(n-1)),
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: end, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
		}}
	if _, err := s.client.BatchV1().Jobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("complete Job %s: %v", name, err)
	}
}

// TestChartShardsOnAPIServer installs the chart with shards=4 on a
// ReadWriteMany claim in a namespace enforcing PodSecurity restricted: no
// PodSecurity warning; the Job is admitted as an Indexed Job of 4 pods at
// once on the headless Service's subdomain; the Service is headless and
// selects the Job's pod template as the API server stored it; the run
// file names pod 0 through it in this namespace; NOTES say to follow pod
// 0. A helm upgrade while the Job runs is refused as for a plain Job;
// once all 4 are done, shards=1 is a plain Job again and the Service goes.
func TestChartShardsOnAPIServer(t *testing.T) {
	s := realAPIServer(t)
	ns := s.namespace(t, "shards")
	ctx := within(t)
	base := []string{"-n", ns, chartDir}
	sharded := []string{"--set", "shards=4", "--set", "persistence.accessModes={ReadWriteMany}"}

	stdout, stderr, err := helmRun(t, []string{"KUBECONFIG=" + s.kubeconfig}, append(append([]string{"install", "headroom"}, base...), sharded...)...)
	if err != nil {
		t.Fatalf("helm install shards=4: %v\n%s", err, stderr)
	}
	if strings.Contains(string(stderr), "PodSecurity") {
		t.Errorf("helm install warned about PodSecurity: %s", stderr)
	}
	if want := "-l batch.kubernetes.io/job-name=headroom-1,batch.kubernetes.io/job-completion-index=0"; !strings.Contains(string(stdout), want) {
		t.Errorf("NOTES do not say how to follow pod 0 (%s):\n%s", want, stdout)
	}
	jobs := s.runJobs(t, ns)
	if got := names(jobs); !slices.Equal(got, []string{"headroom-1"}) {
		t.Fatalf("after install, run Jobs %v, want [headroom-1]", got)
	}
	job := jobs["headroom-1"]
	spec := job.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion ||
		spec.Completions == nil || *spec.Completions != 4 || spec.Parallelism == nil || *spec.Parallelism != 4 ||
		spec.BackoffLimit == nil || *spec.BackoffLimit != 0 {
		t.Errorf("stored Job: completionMode %v, completions %v, parallelism %v, backoffLimit %v; want Indexed, 4, 4, 0",
			spec.CompletionMode, spec.Completions, spec.Parallelism, spec.BackoffLimit)
	}
	if spec.Template.Spec.Subdomain != "headroom-shards" {
		t.Errorf("stored Job's subdomain %q, want headroom-shards", spec.Template.Spec.Subdomain)
	}
	svc, err := s.client.CoreV1().Services(ns).Get(ctx, "headroom-shards", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no headless Service: %v", err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !slices.Equal(svc.Spec.ClusterIPs, []string{corev1.ClusterIPNone}) || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service headroom-shards: clusterIP %q %v, publishNotReadyAddresses %v; want headless, publishing pods not ready", svc.Spec.ClusterIP, svc.Spec.ClusterIPs, svc.Spec.PublishNotReadyAddresses)
	}
	if !matches(svc.Spec.Selector, spec.Template.Labels) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "shard" {
		t.Errorf("Service selects %v on %v; the stored pod template is labelled %v", svc.Spec.Selector, svc.Spec.Ports, spec.Template.Labels)
	}
	cm, err := s.client.CoreV1().ConfigMaps(ns).Get(ctx, "headroom-run", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := parseRunFile(t, cm.Data["run.yaml"])
	if want := "http://headroom-1-0.headroom-shards." + ns + ".svc:7070"; cfg.Sweep.Shards != 4 || cfg.Sweep.Shard.Coordinator != want {
		t.Errorf("run file sweep.shards %d, coordinator %q; want 4, %s", cfg.Sweep.Shards, cfg.Sweep.Shard.Coordinator, want)
	}

	// An upgrade while the sharded Job runs: refused, nothing changes.
	upgrade := append(append([]string{"upgrade", "headroom"}, base...), "--reuse-values", "--set", "run.sweep.target=20")
	if out, err := s.helm(t, upgrade...); err == nil || !strings.Contains(err.Error(), "headroom-1 of release headroom is still running") {
		t.Fatalf("helm upgrade while headroom-1 runs: %v %s, want a refusal naming it", err, out)
	}
	if got := names(s.runJobs(t, ns)); !slices.Equal(got, []string{"headroom-1"}) || s.runTarget(t, ns) != 15 {
		t.Errorf("a refused upgrade changed things: Jobs %v, target %d", got, s.runTarget(t, ns))
	}

	// Once all 4 are done, the next revision runs; shards=1 is a plain
	// Job again, without the Service.
	s.completeIndexedJob(t, ns, "headroom-1")
	s.mustHelm(t, append(upgrade, "--set", "shards=1")...)
	jobs = s.runJobs(t, ns)
	if got := names(jobs); !slices.Equal(got, []string{"headroom-2"}) {
		t.Fatalf("after upgrade 2, run Jobs %v, want [headroom-2]", got)
	}
	if spec := jobs["headroom-2"].Spec; spec.Completions == nil || *spec.Completions != 1 || spec.Template.Spec.Subdomain != "" ||
		spec.CompletionMode != nil && *spec.CompletionMode != batchv1.NonIndexedCompletion {
		t.Errorf("shards=1 Job: completions %v, completionMode %v, subdomain %q; want a plain Job of 1", spec.Completions, spec.CompletionMode, spec.Template.Spec.Subdomain)
	}
	if _, err := s.client.CoreV1().Services(ns).Get(ctx, "headroom-shards", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after shards=1, the headless Service is still there: %v", err)
	}
	s.completeJob(t, ns, "headroom-2")
	s.mustHelm(t, "uninstall", "headroom", "-n", ns)
}

// TestChartShardsExistingClaimOnAPIServer: with persistence.existingClaim
// the claim rule reads the claim's own access modes from the cluster: a
// ReadWriteMany claim is accepted with the default accessModes value, a
// ReadWriteOnce one refused, and nothing is made.
func TestChartShardsExistingClaimOnAPIServer(t *testing.T) {
	s := realAPIServer(t)
	ns := s.namespace(t, "shardclaim")
	ctx := within(t)
	for name, mode := range map[string]corev1.PersistentVolumeAccessMode{"runs-rwx": corev1.ReadWriteMany, "runs-rwo": corev1.ReadWriteOnce} {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{mode},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}
		if _, err := s.client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := s.helm(t, "install", "headroom", chartDir, "-n", ns, "--set", "shards=2", "--set", "persistence.existingClaim=runs-rwo"); err == nil || !strings.Contains(err.Error(), "shards=2 on a ReadWriteOnce claim") {
		t.Fatalf("helm install shards=2 on the ReadWriteOnce claim: %v %s, want a refusal", err, out)
	}
	if got := names(s.runJobs(t, ns)); len(got) != 0 {
		t.Errorf("a refused install made Jobs %v", got)
	}
	s.mustHelm(t, "install", "headroom", chartDir, "-n", ns, "--set", "shards=2", "--set", "persistence.existingClaim=runs-rwx")
	job := s.runJobs(t, ns)["headroom-1"]
	if job == nil || *job.Spec.Completions != 2 {
		t.Fatalf("shards=2 on the ReadWriteMany claim: Jobs %v, want headroom-1 of 2", names(s.runJobs(t, ns)))
	}
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == "runs" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "runs-rwx") {
			t.Errorf("the Job's runs volume is %+v, want the claim runs-rwx", v)
		}
	}
	s.completeIndexedJob(t, ns, "headroom-1")
	s.mustHelm(t, "uninstall", "headroom", "-n", ns)
}
