{{- define "podtemplate.pod" }}
    metadata:
      labels:
        app: edge
    spec:
      containers:
      - name: edge
        image: traefik:v3
        args:
          - --entryPoints.web.address=:8000
        ports:
        {{- range $name, $config := .Values.ports }}
        - name: {{ $name }}
          containerPort: {{ $config.port }}
          {{- if $config.hostPort }}
          hostPort: {{ $config.hostPort }}
          {{- end }}
          protocol: TCP
        {{- end }}
{{ end -}}
