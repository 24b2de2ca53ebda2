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

{{/* The pod security context: headroom's non-root user, which owns the runs volume. */}}
{{- define "headroom.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "headroom.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The run file as the pod reads it: output on the runs volume, the API
key's variable, report.upload from upload.s3. */}}
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
{{- if .Values.upload.credentialsSecret -}}
{{- $_ := set $s3 "access_key_env" "AWS_ACCESS_KEY_ID" -}}
{{- $_ := set $s3 "secret_key_env" "AWS_SECRET_ACCESS_KEY" -}}
{{- end -}}
{{- $report := default (dict) $run.report -}}
{{- $_ := set $report "upload" (dict "s3" $s3) -}}
{{- $_ := set $run "report" $report -}}
{{- end -}}
{{- toYaml $run -}}
{{- end -}}
