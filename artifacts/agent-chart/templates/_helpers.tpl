{{/* Labels on every object. The selector stays the plain manifests'
app.kubernetes.io/name: courier-agent so that an install can move between
them and the chart (a Deployment's selector cannot change). */}}
{{- define "courier-agent.labels" -}}
app.kubernetes.io/name: courier-agent
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "courier-agent.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Where ServiceAccounts are impersonated. */}}
{{- define "courier-agent.agentNamespace" -}}
{{ .Values.agentNamespace | default .Release.Namespace }}
{{- end -}}

{{/* The Secret holding the upstream kubeconfig. */}}
{{- define "courier-agent.upstreamSecret" -}}
{{- if .Values.upstream.existingSecret -}}
{{ .Values.upstream.existingSecret }}
{{- else if .Values.upstream.kubeconfig -}}
courier-agent-upstream
{{- else -}}
{{ fail "set upstream.existingSecret (a Secret with key kubeconfig) or upstream.kubeconfig: the agent needs the management cluster" }}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount subject every binding names. */}}
{{- define "courier-agent.subject" -}}
- kind: ServiceAccount
  name: courier-agent
  namespace: {{ .Release.Namespace }}
{{- end -}}
