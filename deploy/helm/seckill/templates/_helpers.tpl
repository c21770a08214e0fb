{{/* The chart's name, and the release's full name. */}}
{{- define "seckill.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "seckill.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The labels every object carries. */}}
{{- define "seckill.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "seckill.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: seckill
{{- end }}

{{/* What selects the release's pods; a role adds its component. */}}
{{- define "seckill.selectorLabels" -}}
app.kubernetes.io/name: {{ include "seckill.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "seckill.secretName" -}}
{{- default (printf "%s-secrets" (include "seckill.fullname" .)) .Values.secret.name }}
{{- end }}

{{- define "seckill.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "seckill.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "seckill.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The variables every container reads: the shared ConfigMap, then the
Secret's keys one by one (a missing required key stops the pod with a
clear event rather than letting it start half configured). */}}
{{- define "seckill.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "seckill.fullname" . }}
env:
{{- range .Values.secret.keys }}
  - name: {{ .name }}
    valueFrom:
      secretKeyRef:
        name: {{ include "seckill.secretName" $ }}
        key: {{ .name }}
        {{- if .optional }}
        optional: true
        {{- end }}
{{- end }}
{{- end }}

{{/* The pod-level part of the restricted Pod Security Standard, and the
writable /tmp a read-only root file system needs. */}}
{{- define "seckill.podSecurity" -}}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end }}

{{- define "seckill.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- end }}

{{- define "seckill.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}
