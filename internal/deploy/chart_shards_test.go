package deploy

import (
	"bytes"
	"net/url"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// templateIn renders the chart as the release headroom in namespace ns.
func templateIn(t *testing.T, ns string, args ...string) []typedDoc {
	t.Helper()
	out, err := helm(t, append([]string{"template", "headroom", chartDir, "--namespace", ns}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeStrict("helm template "+strings.Join(args, " "), out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// shardService is the render's headless Service, or nil; the rest are
// the objects without it (checkRelease takes every Service for a metrics
// one).
func shardService(objs []typedDoc) (*corev1.Service, []typedDoc) {
	var svc *corev1.Service
	var rest []typedDoc
	for _, o := range objs {
		if s, ok := o.obj.(*corev1.Service); ok && s.Spec.ClusterIP == corev1.ClusterIPNone {
			svc = s
			continue
		}
		rest = append(rest, o)
	}
	return svc, rest
}

// TestChartShardsDefault: with shards at its default of 1 (or set to 1)
// the chart renders what it did before shards: a plain Job, no headless
// Service, no shard port, a run file without sweep.shards; shardPort is
// not used.
func TestChartShardsDefault(t *testing.T) {
	def := template(t)
	if one := template(t, "--set", "shards=1", "--set", "shardPort=7171"); !bytes.Equal(def, one) {
		t.Error("shards=1 renders differently from the default")
	}
	objs, err := decodeStrict("helm template (defaults)", def)
	if err != nil {
		t.Fatal(err)
	}
	job := find[batchv1.Job](objs, "Job")[0]
	spec := job.Spec
	if spec.CompletionMode != nil || spec.Completions != nil || spec.Parallelism != nil || spec.Template.Spec.Subdomain != "" {
		t.Errorf("default Job: completionMode %v, completions %v, parallelism %v, subdomain %q; want none", spec.CompletionMode, spec.Completions, spec.Parallelism, spec.Template.Spec.Subdomain)
	}
	if svc, _ := shardService(objs); svc != nil {
		t.Errorf("default render has the headless Service %s", svc.Name)
	}
	for _, p := range spec.Template.Spec.Containers[0].Ports {
		if p.Name == "shard" {
			t.Errorf("default Job exposes the shard port %d", p.ContainerPort)
		}
	}
	cfg, _ := parseRunFile(t, find[corev1.ConfigMap](objs, "ConfigMap")[0].Data["run.yaml"])
	if cfg.Sweep.Shards != 0 || cfg.Sweep.Shard.Listen != "" || cfg.Sweep.Shard.Coordinator != "" {
		t.Errorf("default run file has sweep.shards %d, shard %+v; want neither", cfg.Sweep.Shards, cfg.Sweep.Shard)
	}
}

// TestChartShards: shards=4 on a ReadWriteMany claim is an Indexed Job of
// 4 pods at once that never retries, its pods on the subdomain of a
// headless Service that selects this revision's run pods alone (ready or
// not) on the port shard; the run file, parsed by headroom's own config,
// has sweep.shards 4, listens on the shard port, and names pod 0 through
// that Service in the release namespace. The rest of the release holds
// together as an unsharded one does.
func TestChartShards(t *testing.T) {
	objs := templateIn(t, "bench", "--set", "shards=4", "--set", "persistence.accessModes={ReadWriteMany}")
	svc, rest := shardService(objs)
	checkRelease(t, rest, appVersion(t))
	job := find[batchv1.Job](objs, "Job")[0]
	spec := job.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion ||
		spec.Completions == nil || *spec.Completions != 4 || spec.Parallelism == nil || *spec.Parallelism != 4 {
		t.Errorf("Job %s: completionMode %v, completions %v, parallelism %v; want Indexed, 4, 4", job.Name, spec.CompletionMode, spec.Completions, spec.Parallelism)
	}
	if spec.BackoffLimit == nil || *spec.BackoffLimit != 0 || spec.BackoffLimitPerIndex != nil || spec.PodFailurePolicy != nil {
		t.Errorf("Job %s may rerun a shard: backoffLimit %v, perIndex %v, podFailurePolicy %v", job.Name, spec.BackoffLimit, spec.BackoffLimitPerIndex, spec.PodFailurePolicy)
	}
	pod := spec.Template
	var port int32
	for _, p := range pod.Spec.Containers[0].Ports {
		if p.Name == "shard" {
			port = p.ContainerPort
		}
	}
	if port != 7070 {
		t.Errorf("the container's shard port is %d, want 7070 (shardPort's default)", port)
	}
	if svc == nil {
		t.Fatalf("no headless Service (kinds %v)", kindsOf(objs))
	}
	if pod.Spec.Subdomain != svc.Name || svc.Name != "headroom-shards" || svc.Namespace != "bench" {
		t.Errorf("subdomain %q, headless Service %s/%s; want both headroom-shards in bench", pod.Spec.Subdomain, svc.Namespace, svc.Name)
	}
	if !svc.Spec.PublishNotReadyAddresses || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "shard" ||
		svc.Spec.Ports[0].Port != port || svc.Spec.Ports[0].TargetPort.String() != "shard" {
		t.Errorf("headless Service spec %+v, want publishNotReadyAddresses and the one port shard %d", svc.Spec, port)
	}
	if !matches(svc.Spec.Selector, pod.Labels) || svc.Spec.Selector["headroom.dev/job"] != job.Name || svc.Spec.Selector["app.kubernetes.io/component"] != "run" {
		t.Errorf("headless Service selects %v; want this revision's run pods (labels %v)", svc.Spec.Selector, pod.Labels)
	}

	// headroom's own /metrics is served by shard 0 alone (the other pods
	// replay lanes and serve no /metrics): the metrics
	// Service and the PodMonitor select that pod, not N pods of which N-1
	// refuse every scrape
	for _, o := range rest {
		if m, ok := o.obj.(*corev1.Service); ok {
			if m.Spec.Selector["batch.kubernetes.io/job-completion-index"] != "0" || !matches(m.Spec.Selector, withIndex(pod.Labels, "0")) {
				t.Errorf("metrics Service %s selects %v; want shard 0's pod alone (completion index 0)", m.Name, m.Spec.Selector)
			}
		}
	}
	pm, err := helm(t, "template", "headroom", chartDir, "--namespace", "bench", "--set", "shards=4", "--set", "persistence.accessModes={ReadWriteMany}", "--set", "metrics.podMonitor.enabled=true", "--show-only", "templates/podmonitor.yaml")
	if err != nil || !strings.Contains(string(pm), `batch.kubernetes.io/job-completion-index: "0"`) {
		t.Errorf("PodMonitor (err %v) does not select shard 0's pod alone:\n%s", err, pm)
	}

	cfg, _ := parseRunFile(t, find[corev1.ConfigMap](objs, "ConfigMap")[0].Data["run.yaml"])
	want := "http://headroom-1-0.headroom-shards.bench.svc:7070"
	if cfg.Sweep.Shards != 4 || cfg.Sweep.Shard.Listen != ":7070" || cfg.Sweep.Shard.Coordinator != want {
		t.Errorf("run file sweep.shards %d, shard %+v; want 4, listen :7070, coordinator %s", cfg.Sweep.Shards, cfg.Sweep.Shard, want)
	}
	if u, err := url.Parse(cfg.Sweep.Shard.Coordinator); err != nil || u.Hostname() != job.Name+"-0."+svc.Name+"."+svc.Namespace+".svc" {
		t.Errorf("coordinator %s does not name pod 0 of %s (hostname %s-0) through %s/%s", cfg.Sweep.Shard.Coordinator, job.Name, job.Name, svc.Namespace, svc.Name)
	}

	// Another port, a run file that says the same count, a join timeout
	// of its own: the port follows, the timeout stays.
	objs = templateIn(t, "bench", "--set", "shards=2", "--set", "shardPort=7171", "--set", "run.sweep.shards=2",
		"--set", "run.sweep.shard.join_timeout_s=600", "--set", "persistence.accessModes={ReadWriteMany}")
	cfg, _ = parseRunFile(t, find[corev1.ConfigMap](objs, "ConfigMap")[0].Data["run.yaml"])
	if cfg.Sweep.Shards != 2 || cfg.Sweep.Shard.Listen != ":7171" || !strings.HasSuffix(cfg.Sweep.Shard.Coordinator, ".svc:7171") || cfg.Sweep.Shard.JoinTimeoutS != 600 {
		t.Errorf("shards=2 shardPort=7171: run file sweep.shards %d, shard %+v", cfg.Sweep.Shards, cfg.Sweep.Shard)
	}
	if svc, _ := shardService(objs); svc == nil || svc.Spec.Ports[0].Port != 7171 || *find[batchv1.Job](objs, "Job")[0].Spec.Completions != 2 {
		t.Errorf("shards=2 shardPort=7171: Service %v, want port 7171 and 2 completions", svc)
	}

	// A long name still gives DNS labels: the Service (the subdomain) and
	// pod 0's hostname, which the coordinator URL names.
	objs = templateIn(t, "bench", "--set", "shards=2", "--set", "persistence.accessModes={ReadWriteMany}",
		"--set", "fullnameOverride=a-very-long-release-name-that-fills-most-of-the-63-characters-x")
	svc, _ = shardService(objs)
	job = find[batchv1.Job](objs, "Job")[0]
	for _, label := range []string{svc.Name, job.Spec.Template.Spec.Subdomain, job.Name + "-0"} {
		if errs := validation.IsDNS1123Label(label); len(errs) != 0 {
			t.Errorf("%q is no DNS label: %v", label, errs)
		}
	}
	cfg, _ = parseRunFile(t, find[corev1.ConfigMap](objs, "ConfigMap")[0].Data["run.yaml"])
	if !strings.HasPrefix(cfg.Sweep.Shard.Coordinator, "http://"+job.Name+"-0."+svc.Name+".bench.svc:") {
		t.Errorf("coordinator %s, Job %s, Service %s", cfg.Sweep.Shard.Coordinator, job.Name, svc.Name)
	}

	// No claim: each pod has its own emptyDir and only pod 0 writes, so
	// nothing is refused; no Job: no Service either.
	if svc, _ := shardService(templateIn(t, "bench", "--set", "shards=4", "--set", "persistence.enabled=false")); svc == nil {
		t.Error("shards=4 without persistence: no headless Service")
	}
	objs = templateIn(t, "bench", "--set", "shards=4", "--set", "job.enabled=false")
	if svc, _ := shardService(objs); svc != nil || slices.Contains(kindsOf(objs), "Job") {
		t.Errorf("shards=4 job.enabled=false renders %v, want no Job and no headless Service", kindsOf(objs))
	}
}

// TestChartShardsRefuses: what cannot work sharded is refused at render
// time: a claim other pods cannot mount, a shard count out of range (by
// the schema), a run file whose count or shard addresses disagree with
// the Job's, a virtual clock, a port taken by the metrics.
func TestChartShardsRefuses(t *testing.T) {
	rwx := []string{"--set", "persistence.accessModes={ReadWriteMany}"}
	for _, bad := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--set", "shards=4"}, "shards=4 on a ReadWriteOnce claim"},
		{[]string{"--set", "shards=4"}, "persistence.accessModes={ReadWriteMany}"},
		{[]string{"--set", "shards=2", "--set", "persistence.accessModes={ReadWriteOncePod}"}, "shards=2 on a ReadWriteOncePod claim"},
		{[]string{"--set", "shards=2", "--set", "persistence.existingClaim=runs"}, "on a ReadWriteOnce claim"},
		{[]string{"--set", "shards=0"}, "/shards"},
		{[]string{"--set", "shards=257"}, "/shards"},
		{[]string{"--set", "shards=four"}, "/shards"},
		{[]string{"--set", "shardPort=0"}, "/shardPort"},
		{[]string{"--set", "run.sweep.shards=300"}, "/run/sweep/shards"},
		{[]string{"--set", "run.sweep.shards=4"}, "run.sweep.shards is 4 but shards is 1"},
		{append([]string{"--set", "shards=4", "--set", "run.sweep.shards=3"}, rwx...), "run.sweep.shards is 3 but shards is 4"},
		{append([]string{"--set", "shards=4", "--set", "run.sweep.shard.coordinator=http://elsewhere:7070"}, rwx...), "chart's to set with shards > 1"},
		{append([]string{"--set", "shards=4", "--set", "run.sweep.shard.listen=:7070"}, rwx...), "chart's to set with shards > 1"},
		{append([]string{"--set", "shards=4", "--set", "run.time_scale=virtual"}, rwx...), "cannot share a virtual clock"},
		{append([]string{"--set", "shards=4", "--set", "shardPort=9464"}, rwx...), "shardPort and metrics.port are both 9464"},
		{append([]string{"--set", "shards=2", "--set", `job.podLabels.headroom\.dev/job=mine`}, rwx...), "job.podLabels sets headroom.dev/job"},
	} {
		_, err := helm(t, append([]string{"template", "headroom", chartDir}, bad.args...)...)
		if err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("helm template %v: %v, want an error saying %q", bad.args, err, bad.msg)
		}
	}
}

// withIndex is labels with the completion index Kubernetes sets on an
// Indexed Job's pod K.
func withIndex(labels map[string]string, k string) map[string]string {
	out := map[string]string{"batch.kubernetes.io/job-completion-index": k}
	for key, v := range labels {
		out[key] = v
	}
	return out
}
