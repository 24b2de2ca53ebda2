{{/* The chart's name, cut to 63 characters. */}}
{{- define "headroom.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the release name alone when it holds the chart's. */}}
{{- define "headroom.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "headroom.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "headroom.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels that select the release's pods. */}}
{{- define "headroom.selectorLabels" -}}
app.kubernetes.io/name: {{ include "headroom.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "headroom.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "headroom.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image, pinned: a digest, else a tag (default the appVersion); never latest. */}}
{{- define "headroom.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if eq $tag "latest" -}}
{{- fail "image.tag: \"latest\" does not say what ran: pin a release tag or a digest" -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the gateway's API key; empty for none. */}}
{{- define "headroom.apiKeySecret" -}}
{{- if .Values.apiKey.existingSecret -}}
{{- .Values.apiKey.existingSecret -}}
{{- else if .Values.apiKey.value -}}
{{- printf "%s-api-key" (include "headroom.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The claim holding run directories; empty when persistence is off. */}}
{{- define "headroom.claimName" -}}
{{- if .Values.persistence.enabled -}}
{{- default (printf "%s-runs" (include "headroom.fullname" .)) .Values.persistence.existingClaim -}}
{{- end -}}
{{- end -}}

{{/* Where run directories are written in the pods. */}}
{{- define "headroom.runsPath" -}}/work/runs{{- end -}}

{{/* The run's Job: one per release revision, so a helm upgrade or rollback
makes a new Job (a new run) instead of patching a finished one, whose pod
template is immutable. */}}
{{- define "headroom.jobName" -}}
{{- printf "%s-%d" (include "headroom.fullname" . | trunc 52 | trimSuffix "-") (int .Release.Revision) -}}
{{- end -}}

{{/* How many headroom processes share each step's lanes: shards, at least 1. */}}
{{- define "headroom.shards" -}}
{{- max 1 (int (default 1 .Values.shards)) -}}
{{- end -}}

{{/* The shards' headless Service, the Job's pods' subdomain. */}}
{{- define "headroom.shardService" -}}
{{- printf "%s-shards" (include "headroom.fullname" . | trunc 56 | trimSuffix "-") -}}
{{- end -}}

{{/* Where shards 1..N-1 reach shard 0, the coordinator: pod 0 of the
Indexed Job (hostname <job>-0) through the headless Service. */}}
{{- define "headroom.coordinator" -}}
{{- printf "http://%s-0.%s.%s.svc:%d" (include "headroom.jobName" .) (include "headroom.shardService" .) .Release.Namespace (int .Values.shardPort) -}}
{{- end -}}

{{/* Whether the chart makes RBAC for the Job's ServiceAccount. */}}
{{- define "headroom.rbacOn" -}}
{{- if or .Values.rbac.deployer.namespaces .Values.rbac.discovery.namespaces -}}true{{- end -}}
{{- end -}}

{{/* The Job's automountServiceAccountToken: job.automountServiceAccountToken
when set, else true only when the chart makes RBAC (the token is what the
deployer and discovery act with). */}}
{{- define "headroom.automountToken" -}}
{{- if kindIs "bool" .Values.job.automountServiceAccountToken -}}
{{- .Values.job.automountServiceAccountToken -}}
{{- else -}}
{{- ternary "true" "false" (eq (include "headroom.rbacOn" .) "true") -}}
{{- end -}}
{{- end -}}

{{/* The run Jobs of this release still running on the cluster (no Complete
or Failed condition, or a pod still active or terminating: a pod rolls its
recipe back after the deadline fails its Job), comma separated. Empty under helm template and
--dry-run=client, which cannot look. */}}
{{- define "headroom.runningJobs" -}}
{{- $running := list -}}
{{- $jobs := lookup "batch/v1" "Job" .Release.Namespace "" -}}
{{- range $j := (dig "items" list $jobs) -}}
{{- $labels := dig "metadata" "labels" dict $j -}}
{{- if and (eq (get $labels "app.kubernetes.io/instance") $.Release.Name) (eq (get $labels "app.kubernetes.io/component") "run") -}}
{{- $done := false -}}
{{- range $c := (dig "status" "conditions" list $j) -}}
{{- if and (has (get $c "type") (list "Complete" "Failed")) (eq (get $c "status") "True") -}}
{{- $done = true -}}
{{- end -}}
{{- end -}}
{{- if or (not $done) (gt (int (dig "status" "active" 0 $j)) 0) (gt (int (dig "status" "terminating" 0 $j)) 0) -}}
{{- $running = append $running (dig "metadata" "name" "" $j) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join ", " $running -}}
{{- end -}}

{{/* The claim's access modes: an existing claim's own, when it can be
looked up, else persistence.accessModes. */}}
{{- define "headroom.accessModes" -}}
{{- $modes := .Values.persistence.accessModes -}}
{{- with .Values.persistence.existingClaim -}}
{{- $pvc := lookup "v1" "PersistentVolumeClaim" $.Release.Namespace . -}}
{{- with (dig "spec" "accessModes" list $pvc) -}}
{{- $modes = . -}}
{{- end -}}
{{- end -}}
{{- join "," $modes -}}
{{- end -}}

{{/* What cannot work is refused at render time (values.schema.json checks
each value's type; these are the combinations). */}}
{{- define "headroom.validate" -}}
{{- if and .Values.apiKey.existingSecret .Values.apiKey.value -}}
{{- fail "apiKey: set existingSecret or value, not both" -}}
{{- end -}}
{{- if and .Values.persistence.existingClaim (not .Values.persistence.enabled) -}}
{{- fail "persistence.existingClaim is set but persistence.enabled is false: the runs would go with the pod; enable persistence or drop existingClaim" -}}
{{- end -}}
{{- if .Values.upload.s3 -}}
{{- if not .Values.upload.s3.bucket -}}
{{- fail "upload.s3 needs upload.s3.bucket: the bucket each run directory is copied to" -}}
{{- end -}}
{{- if eq .Values.upload.credentials "secret" -}}
{{- if not .Values.upload.credentialsSecret -}}
{{- fail "upload.s3 with upload.credentials=secret needs upload.credentialsSecret, a Secret holding the bucket's key pair (upload.accessKeyKey, upload.secretKeyKey); or set upload.credentials=chain to take the pod's own identity (IRSA through serviceAccount.annotations, EKS Pod Identity, an instance role)" -}}
{{- end -}}
{{- else if .Values.upload.credentialsSecret -}}
{{- fail "upload.credentialsSecret is set but upload.credentials is chain: the key pair would be ignored; set upload.credentials=secret, or drop credentialsSecret" -}}
{{- end -}}
{{- else if .Values.upload.credentialsSecret -}}
{{- fail "upload.credentialsSecret is set but upload.s3 is empty: set upload.s3.bucket (and endpoint, prefix, region), or drop credentialsSecret" -}}
{{- end -}}
{{- if and .Values.runsReader.enabled .Values.job.enabled -}}
{{- if not (has "ReadWriteMany" (splitList "," (include "headroom.accessModes" .))) -}}
{{- fail (printf "runsReader.enabled with the Job on a %s claim: the reader could take the claim on another node and keep the Job's pod from starting. Once the Job is done, read the runs in a revision without it: helm upgrade %s <chart> -n %s --reuse-values --set job.enabled=false --set runsReader.enabled=true (the runs stay on the claim); or use a ReadWriteMany claim (persistence.accessModes)" (include "headroom.accessModes" .) .Release.Name .Release.Namespace) -}}
{{- end -}}
{{- end -}}
{{- $shards := include "headroom.shards" . | int -}}
{{- with dig "sweep" "shards" nil .Values.run -}}
{{- if ne (max 1 (int .)) $shards -}}
{{- fail (printf "run.sweep.shards is %d but shards is %d: the Job would run %d pod(s) and the run file would split each step's lanes across %d. Set the count with shards alone (--set shards=%d): the chart writes sweep.shards from it, with the Job's completions; drop run.sweep.shards" (int .) $shards $shards (max 1 (int .)) (max 1 (int .))) -}}
{{- end -}}
{{- end -}}
{{- if gt $shards 1 -}}
{{- $shard := default (dict) (dig "sweep" "shard" nil .Values.run) -}}
{{- if or (hasKey $shard "listen") (hasKey $shard "coordinator") -}}
{{- fail (printf "run.sweep.shard.listen and run.sweep.shard.coordinator are the chart's to set with shards > 1 (\":%d\" and %s, pod 0 through the headless Service): drop them; shardPort sets the port" (int .Values.shardPort) (include "headroom.coordinator" .)) -}}
{{- end -}}
{{- if eq (toString (dig "time_scale" "" .Values.run)) "virtual" -}}
{{- fail (printf "shards=%d with run.time_scale virtual: processes cannot share a virtual clock; set run.time_scale (1 for a real endpoint) or shards=1" $shards) -}}
{{- end -}}
{{- if eq (int .Values.shardPort) (int .Values.metrics.port) -}}
{{- fail (printf "shardPort and metrics.port are both %d: each shard serves both; pick two ports" (int .Values.shardPort)) -}}
{{- end -}}
{{- if and .Values.job.enabled (include "headroom.claimName" .) -}}
{{- if not (has "ReadWriteMany" (splitList "," (include "headroom.accessModes" .))) -}}
{{- fail (printf "shards=%d on a %s claim: each of the Job's %d pods mounts the runs claim, and a claim that is not ReadWriteMany mounts on one node only (ReadWriteOncePod: in one pod), so pods scheduled elsewhere would never start and shard 0 would wait for them. Use a ReadWriteMany claim: --set persistence.accessModes={ReadWriteMany} (its StorageClass must offer it: NFS, CephFS, EFS...), or persistence.existingClaim naming one; or persistence.enabled=false, and the run directory goes with pod 0" $shards (include "headroom.accessModes" .) $shards) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with include "headroom.runningJobs" . -}}
{{- fail (printf "the Job %s of release %s is still running (no Complete or Failed condition): this revision would delete it, stopping its run part way, and its recipe's rollback would race whatever comes next. Wait for it (kubectl -n %s wait --for=condition=complete job/<name>), or stop it first (kubectl -n %s delete job <name>: its pod rolls back on SIGTERM), then run helm again" . $.Release.Name $.Release.Namespace $.Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/* The run file as the pod reads it: output on the runs volume, the API
key's variable, report.upload from upload.s3, and with shards > 1
sweep.shards and how the shards find shard 0 (sweep.shard). */}}
{{- define "headroom.runFile" -}}
{{- $run := deepCopy .Values.run -}}
{{- $_ := set $run "output" (include "headroom.runsPath" .) -}}
{{- if include "headroom.apiKeySecret" . -}}
{{- $recipe := default (dict) $run.recipe -}}
{{- if not (hasKey $recipe "api_key_env") -}}
{{- $_ := set $recipe "api_key_env" .Values.apiKey.env -}}
{{- end -}}
{{- $_ := set $run "recipe" $recipe -}}
{{- end -}}
{{- if .Values.upload.s3 -}}
{{- $s3 := deepCopy .Values.upload.s3 -}}
{{- if eq .Values.upload.credentials "secret" -}}
{{- $_ := set $s3 "access_key_env" "AWS_ACCESS_KEY_ID" -}}
{{- $_ := set $s3 "secret_key_env" "AWS_SECRET_ACCESS_KEY" -}}
{{- end -}}
{{- $report := default (dict) $run.report -}}
{{- $_ := set $report "upload" (dict "s3" $s3) -}}
{{- $_ := set $run "report" $report -}}
{{- end -}}
{{- $shards := include "headroom.shards" . | int -}}
{{- if gt $shards 1 -}}
{{- $sweep := default (dict) $run.sweep -}}
{{- $shard := default (dict) $sweep.shard -}}
{{- $_ := set $shard "listen" (printf ":%d" (int .Values.shardPort)) -}}
{{- $_ := set $shard "coordinator" (include "headroom.coordinator" .) -}}
{{- $_ := set $sweep "shards" $shards -}}
{{- $_ := set $sweep "shard" $shard -}}
{{- $_ := set $run "sweep" $sweep -}}
{{- end -}}
{{- toYaml $run -}}
{{- end -}}
