"""Sample outputs in README.md and docs/*.md, produced by the tool itself.

A sample is a fenced `console` block right after the line `<!-- sample -->`. Its first line is
`$ kubelint-ports ARGS...`; the rest is what that command prints, run from the repository's root
with colour off and an 100-column terminal. tests/test_samples.py fails when a block drifts from
what the tool prints; `python tests/samples.py --write` rewrites every block.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- sample -->"
BLOCK = re.compile(r"^" + re.escape(MARKER) + r"\n```console\n\$ kubelint-ports (?P<args>[^\n]*)\n(?P<output>.*?)^```\n",
                   re.M | re.S)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def run(args: str) -> str:
    """What `kubelint-ports ARGS` prints (stdout, then stderr), as a user sees it at the root."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "PYTHONHASHSEED": "0"}
    env.pop("FORCE_COLOR", None)
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", *shlex.split(args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def samples(text: str) -> list[re.Match]:
    return list(BLOCK.finditer(text))


def rewritten(text: str) -> str:
    return BLOCK.sub(lambda m: f"{MARKER}\n```console\n$ kubelint-ports {m['args']}\n{run(m['args'])}```\n", text)


def main() -> None:
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/samples.py --write")
    for path in documents():
        text = path.read_text(encoding="utf-8")
        new = rewritten(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
