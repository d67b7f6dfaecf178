#!/usr/bin/env bash
# Decides before anything is installed: whether this runner is supported, whether the Helm extra
# is needed (`helm` input: auto finds a Chart.yaml under the paths), and the pip cache directory
# and key (the action's pinned constraints, version and extra; one cache per OS and architecture).
# Inputs arrive as environment variables only. Written for bash 3.2 too (macOS).
set -euo pipefail

case "${RUNNER_OS:-Linux}" in
  Linux|macOS) ;;
  *)
    echo "::error title=kubelint-ports::This action runs on Linux and macOS runners only (its steps are bash scripts and it installs into a POSIX virtualenv); ${RUNNER_OS} is not supported. Run the job on ubuntu-latest or macos-latest; on Windows, use \`pip install kubelint-ports\` and call \`kubelint-ports lint\` in your own step."
    exit 1 ;;
esac

split() {  # a list input: items separated by spaces or new lines, never evaluated
  local text="${1:-}"
  local items=()
  read -r -d '' -a items <<< "${text//$'\n'/ }" || true
  if [ "${#items[@]}" -gt 0 ]; then printf '%s\0' "${items[@]}"; fi
}

helm="${KP_HELM:-auto}"
case "$helm" in
  true|false) ;;
  auto)
    helm=false
    roots=()
    while IFS= read -r -d '' item; do
      case "$item" in -*) item="./$item" ;; esac  # never an option to find
      roots+=("$item")
    done < <(split "${KP_PATHS:-}")
    [ "${#roots[@]}" -gt 0 ] || roots=(.)
    for root in "${roots[@]}"; do
      [ -e "$root" ] || continue
      if [ -n "$(find "$root" \( -name .git -o -name node_modules \) -prune -o -name Chart.yaml -print 2>/dev/null | head -n 1)" ]; then
        helm=true
        break
      fi
    done ;;
  *)
    echo "::error title=kubelint-ports::helm must be auto, true or false, not '$helm'"
    exit 2 ;;
esac

constraints="$GITHUB_ACTION_PATH/action/constraints.txt"
digest=$(KP_CONSTRAINTS="$constraints" KP_EXTRA="$helm" python3 - <<'PY'
import hashlib, os
text = open(os.environ["KP_CONSTRAINTS"], "rb").read()
key = b"\0".join((text, os.environ.get("KP_VERSION", "").encode(), os.environ["KP_EXTRA"].encode()))
print(hashlib.sha256(key).hexdigest()[:16])
PY
)
{
  echo "helm=$helm"
  echo "pip-cache=${RUNNER_TEMP}/kubelint-ports-pip-cache"
  echo "cache-key=kubelint-ports-pip-${RUNNER_OS:-Linux}-${RUNNER_ARCH:-X64}-py3.12-${digest}"
} >> "$GITHUB_OUTPUT"
