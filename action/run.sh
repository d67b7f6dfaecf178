#!/usr/bin/env bash
# Runs kubelint-ports once: annotations on stdout, SARIF, JSON and a Markdown summary as reports;
# sets the step outputs; the linter's exit code (per fail-on) decides the step's result.
set -uo pipefail

split() {  # a list input: items separated by spaces or new lines, never evaluated
  local text="${1:-}"
  local items=()
  read -r -d '' -a items <<< "${text//$'\n'/ }" || true
  if [ "${#items[@]}" -gt 0 ]; then printf '%s\0' "${items[@]}"; fi
}

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
while IFS= read -r -d '' item; do args+=("$item"); done < <(split "${KP_PATHS:-}")
while IFS= read -r -d '' item; do args+=(--values "$item"); done < <(split "${KP_VALUES:-}")
while IFS= read -r -d '' item; do args+=(--nodes "$item"); done < <(split "${KP_NODES:-}")
while IFS= read -r -d '' item; do args+=(--cluster "$item"); done < <(split "${KP_CLUSTER:-}")
[ -n "${KP_CONFIG:-}" ] && args+=(--config "$KP_CONFIG")
args+=(--fail-on "${KP_FAIL_ON:-error}")

out="$RUNNER_TEMP/kubelint-ports"
mkdir -p "$out"
sarif="${KP_SARIF_FILE:-$out/results.sarif}"
args+=(--report "json:$out/report.json" --report "sarif:$sarif" --report "markdown:$out/summary.md")
if [ -n "${GITHUB_REPOSITORY:-}" ] && [ -n "${GITHUB_SHA:-}" ]; then
  args+=(--link-base "${GITHUB_SERVER_URL:-https://github.com}/$GITHUB_REPOSITORY/blob/$GITHUB_SHA")
fi
if [ "${KP_ANNOTATIONS:-true}" = "true" ]; then args+=(--format github); else args+=(--format text); fi

kubelint-ports "${args[@]}"
code=$?

if [ "${KP_SUMMARY:-true}" = "true" ] && [ -f "$out/summary.md" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  cat "$out/summary.md" >> "$GITHUB_STEP_SUMMARY"
fi
if [ -f "$out/report.json" ]; then
  counts=$(python3 - "$out/report.json" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1], encoding="utf-8"))["summary"]
print(summary["error"] + summary["warning"] + summary["note"], summary["error"])
PY
)
  read -r findings errors <<< "$counts"
else
  findings=0 errors=0
fi
{
  echo "sarif-file=$sarif"
  echo "findings=$findings"
  echo "errors=$errors"
} >> "$GITHUB_OUTPUT"
exit "$code"
