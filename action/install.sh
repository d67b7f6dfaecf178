#!/usr/bin/env bash
# Installs kubelint-ports into a virtualenv under $RUNNER_TEMP and puts it on $GITHUB_PATH.
# Inputs arrive as environment variables only (never spliced into the script text).
set -euo pipefail
venv="$RUNNER_TEMP/kubelint-ports-venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
if [ -n "${KP_VERSION:-}" ]; then
  case "$KP_VERSION" in
    *[!0-9A-Za-z.+-]*)
      message="version '$KP_VERSION' is not a version number"
      message="${message//%/%25}"; message="${message//$'\r'/%0D}"; message="${message//$'\n'/%0A}"
      echo "::error title=kubelint-ports::$message"
      exit 2 ;;
  esac
  "$venv/bin/python" -m pip install --quiet "kubelint-ports==$KP_VERSION"
else
  "$venv/bin/python" -m pip install --quiet "$GITHUB_ACTION_PATH"
fi
echo "$venv/bin" >> "$GITHUB_PATH"
