package deploy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// runJobs lists the release's run Jobs by name.
func (s *kasServer) runJobs(t *testing.T, ns string) map[string]*batchv1.Job {
	t.Helper()
	l, err := s.client.BatchV1().Jobs(ns).List(within(t), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=run"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*batchv1.Job{}
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out
}

func names[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// completeJob writes the status the Job controller would once the Job's
// pod has exited 0: started, one pod succeeded, SuccessCriteriaMet and
// Complete.
func (s *kasServer) completeJob(t *testing.T, ns, name string) {
	t.Helper()
	ctx := within(t)
	job, err := s.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	end := metav1.NewTime(time.Now().Truncate(time.Second))
	job.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &end, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: end, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
		}}
	if _, err := s.client.BatchV1().Jobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("complete Job %s: %v", name, err)
	}
}

// runTarget reads sweep.target from the release's run file.
func (s *kasServer) runTarget(t *testing.T, ns string) int {
	t.Helper()
	cm, err := s.client.CoreV1().ConfigMaps(ns).Get(within(t), "headroom-run", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Sweep struct {
			Target int `json:"target"`
		} `json:"sweep"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["run.yaml"]), &run); err != nil {
		t.Fatal(err)
	}
	return run.Sweep.Target
}

// TestChartOnAPIServer installs the chart on a real API server (its
// namespace enforcing PodSecurity's restricted level), then upgrades and
// rolls it back as an operator would: each revision is a Job of its own
// that runs that revision's run file, helm refuses a revision while the
// previous Job runs, a podLabels change is no immutable-template error,
// and the claim, with the runs on it, is the same object throughout and
// outlives helm uninstall. The runs reader comes in a revision without
// the Job, once the Job is done.
func TestChartOnAPIServer(t *testing.T) {
	s := realAPIServer(t)
	ns := s.namespace(t, "chart")
	ctx := within(t)
	base := []string{"-n", ns, chartDir}

	_, stderr, err := helmRun(t, []string{"KUBECONFIG=" + s.kubeconfig}, append([]string{"install", "headroom"}, base...)...)
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, stderr)
	}
	if strings.Contains(string(stderr), "PodSecurity") {
		t.Errorf("helm install warned about PodSecurity: %s", stderr)
	}
	jobs := s.runJobs(t, ns)
	if got := names(jobs); !slices.Equal(got, []string{"headroom-1"}) {
		t.Fatalf("after install, run Jobs %v, want [headroom-1]", got)
	}
	pod := jobs["headroom-1"].Spec.Template.Spec
	if a := pod.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("the Job mounts a service-account token with RBAC off: %v", a)
	}
	pvc, err := s.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "headroom-runs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.runTarget(t, ns); got != 15 {
		t.Errorf("run file target %d, want the default 15", got)
	}

	// A changed run file while the first run is going: refused, nothing changes.
	out, err := s.helm(t, append([]string{"upgrade", "headroom"}, append(base, "--set", "run.sweep.target=20")...)...)
	if err == nil || !strings.Contains(err.Error(), "headroom-1 of release headroom is still running") {
		t.Fatalf("helm upgrade while headroom-1 runs: %v %s, want a refusal naming it", err, out)
	}
	if got := names(s.runJobs(t, ns)); !slices.Equal(got, []string{"headroom-1"}) || s.runTarget(t, ns) != 15 {
		t.Errorf("a refused upgrade changed things: Jobs %v, target %d", got, s.runTarget(t, ns))
	}

	// Once it is done, the changed run file is a new Job: a new run.
	s.completeJob(t, ns, "headroom-1")
	s.mustHelm(t, append([]string{"upgrade", "headroom"}, append(base, "--set", "run.sweep.target=20")...)...)
	if got := names(s.runJobs(t, ns)); !slices.Equal(got, []string{"headroom-2"}) {
		t.Errorf("after upgrade 2, run Jobs %v, want [headroom-2] (headroom-1 deleted by helm)", got)
	}
	if got := s.runTarget(t, ns); got != 20 {
		t.Errorf("after upgrade 2, run file target %d, want 20", got)
	}

	// A pod label: no immutable pod template, since the Job is new.
	s.completeJob(t, ns, "headroom-2")
	s.mustHelm(t, append([]string{"upgrade", "headroom"}, append(base, "--reuse-values", "--set", "job.podLabels.team=blue")...)...)
	jobs = s.runJobs(t, ns)
	if j := jobs["headroom-3"]; j == nil || j.Spec.Template.Labels["team"] != "blue" || len(jobs) != 1 {
		t.Errorf("after upgrade 3, run Jobs %v, want headroom-3 with pod label team=blue", names(jobs))
	}

	// helm rollback renders nothing: it makes revision 1's objects again,
	// so revision 1's Job (gone since upgrade 2) is made again and runs
	// revision 1's run file, as revision 4.
	s.completeJob(t, ns, "headroom-3")
	s.mustHelm(t, "rollback", "headroom", "1", "-n", ns)
	jobs = s.runJobs(t, ns)
	if got := names(jobs); !slices.Equal(got, []string{"headroom-1"}) {
		t.Errorf("after rollback to 1, run Jobs %v, want [headroom-1] made again", got)
	} else if jobs["headroom-1"].Status.CompletionTime != nil {
		t.Error("after rollback, headroom-1 is the finished Job of revision 1, not a new one")
	}
	if got := s.runTarget(t, ns); got != 15 {
		t.Errorf("after rollback to 1, run file target %d, want revision 1's 15", got)
	}
	hist := s.mustHelm(t, "history", "headroom", "-n", ns, "-o", "yaml")
	if n := strings.Count(hist, "revision:"); n != 4 {
		t.Errorf("helm history has %d revisions, want 4:\n%s", n, hist)
	}

	// The runs reader: refused while the Job runs (the revision would
	// delete it), made in a revision without the Job once it is done.
	readerArgs := append([]string{"upgrade", "headroom"}, append(base, "--reuse-values", "--set", "job.enabled=false", "--set", "runsReader.enabled=true")...)
	if _, err := s.helm(t, readerArgs...); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("the runs reader while headroom-1 runs: %v, want a refusal", err)
	}
	if _, err := s.client.CoreV1().Pods(ns).Get(ctx, "headroom-runs", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the reader pod exists while the Job runs: %v", err)
	}
	s.completeJob(t, ns, "headroom-1")
	_, stderr, err = helmRun(t, []string{"KUBECONFIG=" + s.kubeconfig}, readerArgs...)
	if err != nil {
		t.Fatalf("the runs reader once the Job is done: %v\n%s", err, stderr)
	}
	if got := names(s.runJobs(t, ns)); len(got) != 0 {
		t.Errorf("the reader's revision has run Jobs %v, want none", got)
	}
	reader, err := s.client.CoreV1().Pods(ns).Get(ctx, "headroom-runs", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no reader pod (admitted under PodSecurity restricted?): %v\n%s", err, stderr)
	}
	if v := reader.Spec.Volumes[0].PersistentVolumeClaim; v == nil || v.ClaimName != "headroom-runs" || !v.ReadOnly {
		t.Errorf("the reader mounts %+v, want the claim headroom-runs read-only", reader.Spec.Volumes[0])
	}

	// The claim was never remade, and outlives the release.
	s.mustHelm(t, "uninstall", "headroom", "-n", ns)
	after, err := s.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "headroom-runs", metav1.GetOptions{})
	if err != nil || after.UID != pvc.UID {
		t.Errorf("after five revisions and uninstall the claim is %v (%v), want the one install made (%s)", after.UID, err, pvc.UID)
	}
}

// TestChartReaderBesideJobOnAPIServer: on a ReadWriteOnce claim the chart
// refuses the reader beside the Job, so nothing is made; on a
// ReadWriteMany claim both come up, the reader read-only.
func TestChartReaderBesideJobOnAPIServer(t *testing.T) {
	s := realAPIServer(t)
	ns := s.namespace(t, "reader")
	ctx := within(t)
	if out, err := s.helm(t, "install", "headroom", chartDir, "-n", ns, "--set", "runsReader.enabled=true"); err == nil || !strings.Contains(err.Error(), "keep the Job's pod from starting") {
		t.Fatalf("helm install with the reader beside the Job on ReadWriteOnce: %v %s, want a refusal", err, out)
	}
	if l, _ := s.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("a refused install made pods: %d", len(l.Items))
	}
	s.mustHelm(t, "install", "headroom", chartDir, "-n", ns, "--set", "runsReader.enabled=true", "--set", "persistence.accessModes={ReadWriteMany}")
	if got := names(s.runJobs(t, ns)); !slices.Equal(got, []string{"headroom-1"}) {
		t.Errorf("run Jobs %v, want [headroom-1]", got)
	}
	pvc, err := s.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "headroom-runs", metav1.GetOptions{})
	if err != nil || !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) {
		t.Errorf("claim %v (%v), want ReadWriteMany", pvc.Spec.AccessModes, err)
	}
	reader, err := s.client.CoreV1().Pods(ns).Get(ctx, "headroom-runs", metav1.GetOptions{})
	if err != nil || !reader.Spec.Containers[0].VolumeMounts[0].ReadOnly {
		t.Errorf("reader pod %v, want it mounting the runs read-only", err)
	}
	s.client.BatchV1().Jobs(ns).Delete(context.Background(), "headroom-1", metav1.DeleteOptions{})
}
