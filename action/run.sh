#!/usr/bin/env bash
# Runs kubelint-ports once: annotations on stdout, SARIF, JSON and a Markdown summary as reports;
# sets the step outputs; the linter's exit code (per fail-on) decides the step's result.
# The linter is the install step's ($KP_BIN, its venv's own entry point: the job's PATH is never
# changed); without KP_BIN (run by hand), `kubelint-ports` on PATH.
# fail-on is passed only when the input is set: empty leaves the config file's `fail-on` (else error).
# sarif-file is set only when this run wrote the SARIF file (an upload step checks it is not '').
# Inputs arrive as environment variables only. Options are passed as `--name=value` and the paths
# after `--`, so no input can become an option (`--helm-binary=./evil.sh`, `--output=F`); every
# value put in a workflow command is escaped; a crash is a failure with no counts, never "0 findings".
set -uo pipefail

escape_data() {  # a workflow-command message: % CR LF as GitHub decodes them
  local text="${1//%/%25}"
  text="${text//$'\r'/%0D}"
  printf '%s' "${text//$'\n'/%0A}"
}

fail() {
  echo "::error title=kubelint-ports::$(escape_data "$1")"
  exit "${2:-2}"
}

split() {  # a list input: items separated by spaces or new lines, never evaluated
  local text="${1:-}"
  local items=()
  read -r -d '' -a items <<< "${text//$'\n'/ }" || true
  if [ "${#items[@]}" -gt 0 ]; then printf '%s\0' "${items[@]}"; fi
}

case "${KP_FAIL_ON:-}" in
  ""|error|warning|note|never) ;;
  *) fail "fail-on must be one of error, warning, note, never, not '${KP_FAIL_ON}'" ;;
esac
case "${KP_SARIF_FILE:-}${KP_CONFIG:-}" in
  *$'\n'*|*$'\r'*) fail "sarif-file and config must not contain a line break" ;;
esac

args=(lint)
if [ -n "${KP_ARGS:-}" ]; then  # extra options, split as a shell would (quotes kept), never run
  parsed="$(mktemp)"
  if ! python3 -c 'import os, shlex, sys
try:
    words = shlex.split(os.environ["KP_ARGS"])
except ValueError as error:
    sys.exit(str(error))
sys.stdout.write("".join(word + "\0" for word in words))' > "$parsed"; then
    echo "::error title=kubelint-ports::args is not a list of arguments (an unclosed quote?)"
    exit 2
  fi
  while IFS= read -r -d '' item; do args+=("$item"); done < "$parsed"
  rm -f "$parsed"
fi
while IFS= read -r -d '' item; do args+=("--values=$item"); done < <(split "${KP_VALUES:-}")
while IFS= read -r -d '' item; do args+=("--nodes=$item"); done < <(split "${KP_NODES:-}")
while IFS= read -r -d '' item; do args+=("--cluster=$item"); done < <(split "${KP_CLUSTER:-}")
[ -n "${KP_CONFIG:-}" ] && args+=("--config=$KP_CONFIG")
[ -n "${KP_FAIL_ON:-}" ] && args+=("--fail-on=$KP_FAIL_ON")

out="$RUNNER_TEMP/kubelint-ports"
mkdir -p "$out"
sarif="${KP_SARIF_FILE:-$out/results.sarif}"
# A report left by an earlier run must never pass for this run's: sarif-file is set only if the
# linter writes it again.
rm -f "$out/report.json" "$out/summary.md" "$out/stderr.txt" "$out/results.sarif"
if [ -L "$sarif" ] || [ -f "$sarif" ]; then rm -f "$sarif"; fi
args+=("--report=json:$out/report.json" "--report=sarif:$sarif" "--report=markdown:$out/summary.md")
if [ -n "${GITHUB_REPOSITORY:-}" ] && [ -n "${GITHUB_SHA:-}" ]; then
  args+=("--link-base=${GITHUB_SERVER_URL:-https://github.com}/$GITHUB_REPOSITORY/blob/$GITHUB_SHA")
fi
if [ "${KP_ANNOTATIONS:-true}" = "true" ]; then args+=(--format=github); else args+=(--format=text); fi
# A fresh checkout has no cache to read, and one written there would die with the runner (docs/cache.md).
args+=(--no-cache)
args+=(--)
while IFS= read -r -d '' item; do args+=("$item"); done < <(split "${KP_PATHS:-}")

# Its standard error is kept to quote in the step's error when it stops before reporting.
"${KP_BIN:-kubelint-ports}" "${args[@]}" 2> "$out/stderr.txt"
code=$?
cat "$out/stderr.txt" >&2

if [ "${KP_SUMMARY:-true}" = "true" ] && [ -f "$out/summary.md" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  cat "$out/summary.md" >> "$GITHUB_STEP_SUMMARY"
fi
counts=""
if [ "$code" -le 2 ] && [ -f "$out/report.json" ]; then
  counts=$(python3 - "$out/report.json" <<'PY'
import json, sys
try:
    summary = json.load(open(sys.argv[1], encoding="utf-8"))["summary"]
    print(int(summary["error"]) + int(summary["warning"]) + int(summary["note"]), int(summary["error"]))
except Exception:
    pass
PY
)
fi
findings="" errors=""
if [ -n "$counts" ]; then
  read -r findings errors <<< "$counts"
else  # a crash (exit 3 or a signal), a usage error or no report: the counts are unknown, not zero
  if [ "$code" -eq 2 ]; then
    what="kubelint-ports stopped on a usage or input error (exit 2) before reporting"
  elif [ -f "$out/report.json" ]; then
    what="kubelint-ports failed (exit $code) on an internal error: its reports are incomplete"
  else
    what="kubelint-ports failed (exit $code) before reporting"
  fi
  why=$(grep -v '^[[:space:]]*$' "$out/stderr.txt" 2>/dev/null | tail -n 3)
  [ -n "$why" ] && what="$what: $why"
  [ -f "$sarif" ] || what="$what. No SARIF report was written (the sarif-file output is empty)"
  echo "::error title=kubelint-ports::$(escape_data "$what"); its findings are unknown"
  [ "$code" -eq 0 ] && code=3
fi
{
  if [ -f "$sarif" ]; then echo "sarif-file=$sarif"; fi
  echo "findings=$findings"
  echo "errors=$errors"
} >> "$GITHUB_OUTPUT"
exit "$code"
