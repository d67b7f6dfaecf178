#!/usr/bin/env bash
# Installs kubelint-ports into a virtualenv under $RUNNER_TEMP, with the dependency versions pinned
# in action/constraints.txt, the Helm extra only when the plan step found charts, and pip's cache
# in the directory the cache step restores. The venv is never put on $GITHUB_PATH (later steps keep
# the job's own Python and pip first): its `kubelint-ports` is handed to the lint step as the
# `kubelint-ports` output, by its full path.
# Inputs arrive as environment variables only (never spliced into the script text).
set -euo pipefail
venv="$RUNNER_TEMP/kubelint-ports-venv"
"${KP_PYTHON:-python3}" -m venv "$venv"
constraints="$GITHUB_ACTION_PATH/action/constraints.txt"
extra=""
if [ "${KP_HELM:-false}" = "true" ]; then extra="[helm]"; fi
if [ -n "${KP_VERSION:-}" ]; then
  case "$KP_VERSION" in
    *[!0-9A-Za-z.+-]*)
      message="version '$KP_VERSION' is not a version number"
      message="${message//%/%25}"; message="${message//$'\r'/%0D}"; message="${message//$'\n'/%0A}"
      echo "::error title=kubelint-ports::$message"
      exit 2 ;;
  esac
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c "$constraints" \
    "kubelint-ports${extra}==$KP_VERSION"
else
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c "$constraints" \
    "$GITHUB_ACTION_PATH$extra"
fi
tool="$venv/bin/kubelint-ports"
if [ ! -x "$tool" ]; then
  echo "::error title=kubelint-ports::the install wrote no kubelint-ports program in its virtualenv"
  exit 1
fi
echo "kubelint-ports=$tool" >> "$GITHUB_OUTPUT"
