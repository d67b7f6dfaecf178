# kubelint-ports: the findings in the log, a JUnit report at test-results/kubelint-ports.xml, and
# the exit code per fail-on (1 findings, 2 a usage or input error, 3 an internal error).
# It installs into a hidden virtualenv in the workspace (lint skips hidden directories):
# a commit of main until the first release, `kubelint-ports==0.1.0` once v0.1.0 is out.
# KUBELINT_PORTS_INSTALL=: skips the install when kubelint-ports is on PATH already.
if [ "${KUBELINT_PORTS_INSTALL:-}" != ":" ]; then
  python3 -m venv .kubelint-ports-venv &&
    .kubelint-ports-venv/bin/python -m pip install --quiet --disable-pip-version-check "https://github.com/kubelint-ports/kubelint-ports/archive/0123456789abcdef0123456789abcdef01234567.tar.gz" &&
    PATH="$PWD/.kubelint-ports-venv/bin:$PATH" || exit 1
fi
# A report left by an earlier run in this workspace never passes for this run's.
mkdir -p test-results && rm -f test-results/kubelint-ports.xml || exit 1
# Paths: the config file's `paths`, else the repository; or name them after the options.
kubelint-ports lint --report junit:test-results/kubelint-ports.xml
