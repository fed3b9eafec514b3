{{/* The name every object of one agent shares. */}}
{{- define "agent.name" -}}
agentwatch-agent-{{ required "agent: the agent's name in agentwatch" .Values.agent }}
{{- end -}}

{{- define "agent.labels" -}}
app.kubernetes.io/name: agentwatch-agent
app.kubernetes.io/instance: {{ .Values.agent }}
{{- end -}}

{{- define "agent.secretName" -}}
{{- if .Values.existingSecret -}}{{ .Values.existingSecret }}{{- else -}}{{ include "agent.name" . }}{{- end -}}
{{- end -}}
