{{/* Labels on every object. The selector stays the plain manifests' app: courier
so that an install can move between them and the chart (a Deployment's
selector cannot change). */}}
{{- define "courier.labels" -}}
app: courier
app.kubernetes.io/name: courier
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "courier.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The TLS Secret the Deployment mounts. */}}
{{- define "courier.servingSecretName" -}}
{{ .Values.servingCert.existingSecret | default "courier-serving-cert" }}
{{- end -}}

{{/* The ServiceAccount subject every binding names. */}}
{{- define "courier.subject" -}}
- kind: ServiceAccount
  name: courier
  namespace: {{ .Release.Namespace }}
{{- end -}}
