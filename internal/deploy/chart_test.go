package deploy

import (
	"slices"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/upload"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestChartJobPerRevision: the Job is named from the release revision, so
// helm upgrade and rollback make a new Job instead of patching the
// previous one's immutable pod template, and job.enabled=false renders
// none (a revision that only reads the runs back).
func TestChartJobPerRevision(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "headroom-1"},
		{[]string{"--set", "fullnameOverride=a-very-long-release-name-that-fills-most-of-the-63-characters-x"}, "a-very-long-release-name-that-fills-most-of-the-63-c-1"},
	} {
		objs, err := decodeStrict("helm template", template(t, c.args...))
		if err != nil {
			t.Fatal(err)
		}
		jobs := find[batchv1.Job](objs, "Job")
		if len(jobs) != 1 || jobs[0].Name != c.want {
			t.Errorf("%v: Jobs %v, want one named %s", c.args, kindsOf(objs), c.want)
		}
	}
	objs, err := decodeStrict("helm template (reader only)", template(t, "--set", "job.enabled=false", "--set", "runsReader.enabled=true"))
	if err != nil {
		t.Fatal(err)
	}
	if got := kindsOf(objs); slices.Contains(got, "Job") || !slices.Contains(got, "Pod") {
		t.Errorf("job.enabled=false with the reader renders %v, want the reader Pod and no Job", got)
	}
}

// TestChartSecurity: the pods' security contexts come from values (the
// default is headroom's user 65532, restricted), and the Job mounts a
// service-account token only when the chart makes RBAC for it, or when
// told to.
func TestChartSecurity(t *testing.T) {
	jobPod := func(args ...string) corev1.PodSpec {
		t.Helper()
		objs, err := decodeStrict("helm template", template(t, args...))
		if err != nil {
			t.Fatal(err)
		}
		return find[batchv1.Job](objs, "Job")[0].Spec.Template.Spec
	}
	def := jobPod()
	if sc := def.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.FSGroup == nil || *sc.FSGroup != 65532 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("default pod security context %+v, want user and fsGroup 65532, RuntimeDefault seccomp", def.SecurityContext)
	}
	if sc := def.Containers[0].SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("default container security context %+v", def.Containers[0].SecurityContext)
	}
	// OpenShift's restricted SCC assigns the user: the fixed IDs can go.
	openshift := jobPod("--set", "podSecurityContext.runAsUser=null", "--set", "podSecurityContext.runAsGroup=null", "--set", "podSecurityContext.fsGroup=null")
	if sc := openshift.SecurityContext; sc == nil || sc.RunAsUser != nil || sc.RunAsGroup != nil || sc.FSGroup != nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("with the IDs set to null the pod security context is %+v, want runAsNonRoot alone with seccomp", openshift.SecurityContext)
	}
	if sc := jobPod("--set", "securityContext.readOnlyRootFilesystem=false").Containers[0].SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || *sc.ReadOnlyRootFilesystem {
		t.Errorf("securityContext.readOnlyRootFilesystem=false gave %+v", sc)
	}
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--set", "rbac.deployer.namespaces={serving}"}, true},
		{[]string{"--set", "rbac.discovery.namespaces={serving}"}, true},
		{[]string{"--set", "job.automountServiceAccountToken=true"}, true},
		{[]string{"--set", "rbac.deployer.namespaces={serving}", "--set", "job.automountServiceAccountToken=false"}, false},
	} {
		if a := jobPod(c.args...).AutomountServiceAccountToken; a == nil || *a != c.want {
			t.Errorf("%v: automountServiceAccountToken %v, want %v", c.args, a, c.want)
		}
	}
}

// TestChartUploadCredentials: upload.credentials=chain names no key
// variables in the run file and reads no Secret, leaving the SDK's default
// chain (IRSA, EKS Pod Identity, an instance role) to the pod's identity;
// secret reads the key pair from credentialsSecret.
func TestChartUploadCredentials(t *testing.T) {
	runFile := func(args ...string) (upload.S3, []corev1.EnvVar) {
		t.Helper()
		objs, err := decodeStrict("helm template", template(t, args...))
		if err != nil {
			t.Fatal(err)
		}
		checkRelease(t, objs, appVersion(t))
		_, up := parseRunFile(t, find[corev1.ConfigMap](objs, "ConfigMap")[0].Data["run.yaml"])
		if up.S3 == nil {
			t.Fatalf("%v: no report.upload.s3 in the run file", args)
		}
		return *up.S3, find[batchv1.Job](objs, "Job")[0].Spec.Template.Spec.Containers[0].Env
	}
	s3, env := runFile("--set", "upload.s3.bucket=bench", "--set", "upload.credentials=chain",
		"--set", "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/headroom")
	if s3.AccessKeyEnv != "" || s3.SecretKeyEnv != "" || len(env) != 0 {
		t.Errorf("chain: run file names %q/%q and the pod gets %v, want neither", s3.AccessKeyEnv, s3.SecretKeyEnv, env)
	}
	s3, env = runFile("--set", "upload.s3.bucket=bench", "--set", "upload.credentialsSecret=s3-keys")
	if s3.AccessKeyEnv != "AWS_ACCESS_KEY_ID" || len(env) != 2 || env[0].ValueFrom == nil || env[0].ValueFrom.SecretKeyRef.Name != "s3-keys" {
		t.Errorf("secret: run file names %q and the pod gets %v", s3.AccessKeyEnv, env)
	}
}

// TestChartRefuses: what cannot work is refused at render time.
func TestChartRefuses(t *testing.T) {
	// What cannot work is refused at render time, each with its own
	// message: by values.schema.json (a value of the wrong type or an
	// unknown key) or by headroom.validate (a combination).
	for _, bad := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--set", "image.tag=latest"}, "pin a release tag"},
		{[]string{"--set", "runsReader.enabled=true", "--set", "persistence.enabled=false"}, "runsReader needs persistence.enabled"},
		{[]string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.service.enabled=false"}, "needs metrics.service.enabled"},
		{[]string{"--set", "job.resources=foo"}, "/job/resources"},
		{[]string{"--set", "job.resource.limits.cpu=1"}, "resource"},
		{[]string{"--set", "persistence.accessModes={ReadWriteSometimes}"}, "/persistence/accessModes"},
		{[]string{"--set", "metrics.port=0"}, "/metrics/port"},
		{[]string{"--set", "upload.s3.bucket=bench"}, "needs upload.credentialsSecret"},
		{[]string{"--set", "upload.s3.endpoint=http://minio:9000", "--set", "upload.credentialsSecret=keys"}, "needs upload.s3.bucket"},
		{[]string{"--set", "upload.s3.bucket=bench", "--set", "upload.credentials=chain", "--set", "upload.credentialsSecret=keys"}, "credentials is chain"},
		{[]string{"--set", "upload.credentials=static"}, "/upload/credentials"},
		{[]string{"--set", "upload.credentialsSecret=keys"}, "upload.s3 is empty"},
		{[]string{"--set", "apiKey.existingSecret=k", "--set", "apiKey.value=sk-1"}, "not both"},
		{[]string{"--set", "persistence.enabled=false", "--set", "persistence.existingClaim=runs"}, "existingClaim is set"},
		// The runs reader beside the Job on a ReadWriteOnce claim races it.
		{[]string{"--set", "runsReader.enabled=true"}, "keep the Job's pod from starting"},
	} {
		_, err := helm(t, append([]string{"template", "headroom", chartDir}, bad.args...)...)
		if err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("helm template %v: %v, want an error saying %q", bad.args, err, bad.msg)
		}
	}
}
