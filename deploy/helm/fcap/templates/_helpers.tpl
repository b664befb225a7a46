{{/* The chart's name, or nameOverride. */}}
{{- define "fcap.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The StatefulSet's name and the prefix of everything else: the release
name, or fullnameOverride. Pod names (<fullname>-0, ...) are the nodes'
ring names, so changing it on a running cluster gives every node a new
identity. Capped at 52 characters: a StatefulSet adds the pod ordinal and
its controller-revision-hash label to it.
*/}}
{{- define "fcap.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The headless Service: the StatefulSet's serviceName and the gossip seed name. */}}
{{- define "fcap.headless" -}}
{{- include "fcap.fullname" . }}-headless
{{- end -}}

{{/* Labels of every object. */}}
{{- define "fcap.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fcap.selectorLabels" . }}
app.kubernetes.io/version: {{ include "fcap.version" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The labels that select this release's pods. */}}
{{- define "fcap.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fcap.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The fcap version deployed: image.tag, or the chart's appVersion. */}}
{{- define "fcap.version" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if or (not $tag) (eq $tag "latest") -}}
{{- fail "image.tag: set a version (the chart's appVersion is the default); \"latest\" says nothing about which build runs" -}}
{{- end -}}
{{- $tag -}}
{{- end -}}

{{- define "fcap.image" -}}
{{ .Values.image.repository }}:{{ include "fcap.version" . }}
{{- end -}}
