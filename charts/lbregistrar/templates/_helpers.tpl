{{/*
The label every object carries and the Deployment selects its pods by; the
same as config/ gives them.
*/}}
{{- define "lbregistrar.selectorLabels" -}}
app.kubernetes.io/name: lbregistrar
{{- end }}

{{/* Labels of every object: the selector label and Helm's own. */}}
{{- define "lbregistrar.labels" -}}
{{ include "lbregistrar.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The controller's service account, the subject of every binding. */}}
{{- define "lbregistrar.subject" -}}
- kind: ServiceAccount
  name: lbregistrar
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
cert-manager's cainjector fills the caBundle of an object annotated so from
the webhook's Certificate.
*/}}
{{- define "lbregistrar.injectCAFrom" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/lbregistrar-webhook
{{- end }}
