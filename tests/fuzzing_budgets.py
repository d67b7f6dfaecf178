"""Budgets an untrusted repository could get around (issue 31): generators and checks for the
fuzzing campaign (`tests/fuzzing.py`, surfaces "archive" and "repository-config"), and the
archive builders `tests/test_hostile_budgets.py` makes its reproducers with.

- `hostile_archive(rng)`: a chart archive (.tgz) of GNU-sparse members (type `S`, with extension
  blocks), PAX sparse members (formats 0.0, 0.1, 1.0), PAX `size` records that override the
  header, long names (GNU `L`/`K`, PAX `path`), links in and out, archives inside it, huge,
  negative and garbled declared sizes, devices, and truncated or corrupted gzip.
  `check_archive(data, scratch)` lints it in-process: no exception, no internal diagnostic, and
  the process's peak memory grows by no more than the archive budget allows.
- `repository_config(rng)`: a `.kubelint-ports.yaml` (or a pyproject.toml) whose `limits:` hold
  values in and out of range, huge, negative, zero, text, NaN, infinities, booleans, lists.
  `check_repository_config(text, scratch)`: refused with a ConfigError or ValueError, or the
  run's limits are never above the defaults (a repository may lower a limit, never raise it).

Run on its own: `python tests/fuzzing_budgets.py --count 3000 --seed 1` (both surfaces).
"""

from __future__ import annotations

import gzip
import random
import tarfile
from pathlib import Path

MIB = 1024 * 1024
CHART_YAML = b"apiVersion: v2\nname: c\nversion: 0.1.0\n"
CONFIG_MAP = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n"
FUZZ_FILE_MIB = 4  # max-file-mib while fuzzing archives: an archive may unpack to 4 x 4 MiB
RSS_SLACK_MIB = 48  # what one lint may add to the peak besides the archive's bytes (parsing, copies)


# --- archive building blocks ---------------------------------------------------------------------


def padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % tarfile.BLOCKSIZE)


def with_checksum(header: bytes) -> bytes:
    """A 512-byte header with its checksum field recomputed (after a field was written by hand)."""
    block = bytearray(header)
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def octal(number: int, width: int = 12) -> bytes:
    return b"%0*o\0" % (width - 1, number)


def regular(name: str, data: bytes, fmt: int = tarfile.GNU_FORMAT, pax: dict | None = None,
            kind: bytes = tarfile.REGTYPE, link: str = "") -> bytes:
    """A member as tarfile writes it (long names as GNU `L` blocks or PAX `path` records)."""
    info = tarfile.TarInfo(name)
    info.size, info.type, info.linkname = len(data) if kind in tarfile.REGULAR_TYPES else 0, kind, link
    info.pax_headers = dict(pax or {})
    return info.tobuf(format=fmt) + (padded(data) if kind in tarfile.REGULAR_TYPES else b"")


def gnu_sparse(name: str, real_size: int, stored: bytes = b"", extensions: int = 0) -> bytes:
    """An old-GNU sparse member (type `S`): `stored` bytes of data at offset 0 of a file of
    `real_size` bytes, the rest holes; `extensions` extra sparse-map blocks follow the header."""
    info = tarfile.TarInfo(name)
    info.size, info.type = len(stored), tarfile.GNUTYPE_SPARSE
    blocks = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    top = len(blocks) - tarfile.BLOCKSIZE  # a long name puts blocks before the header itself
    header = bytearray(blocks[top:])
    header[386:398], header[398:410] = octal(0), octal(len(stored))
    header[482] = 1 if extensions else 0
    header[483:495] = octal(real_size)
    blocks[top:] = with_checksum(bytes(header))
    for number in range(extensions):
        extension = bytearray(tarfile.BLOCKSIZE)
        for entry in range(21):
            extension[entry * 24:entry * 24 + 12] = octal(real_size - 1 - entry)
            extension[entry * 24 + 12:entry * 24 + 24] = octal(0)
        extension[504] = 1 if number + 1 < extensions else 0
        blocks += extension
    return bytes(blocks) + padded(stored)


def pax_sparse(name: str, real_size: int, version: str = "0.1") -> bytes:
    """A PAX sparse member (GNU formats 0.0, 0.1, 1.0), holes only."""
    if version == "1.0":
        sparse_map = padded(b"1\n0\n0\n")  # one entry: offset 0, 0 bytes
        return regular(name + ".sparse", sparse_map, tarfile.PAX_FORMAT, {
            "GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": name,
            "GNU.sparse.realsize": str(real_size)})
    if version == "0.0":
        return regular(name, b"", tarfile.PAX_FORMAT, {
            "GNU.sparse.size": str(real_size), "GNU.sparse.numblocks": "1",
            "GNU.sparse.offset": "0", "GNU.sparse.numbytes": "0"})
    return regular(name, b"", tarfile.PAX_FORMAT, {
        "GNU.sparse.map": "0,0", "GNU.sparse.size": str(real_size), "GNU.sparse.numblocks": "1"})


def pax_size_override(name: str, data: bytes, size: int) -> bytes:
    """A member whose PAX `size` record says `size` while its header says len(data)."""
    return regular(name, data, tarfile.PAX_FORMAT, {"size": str(size)})


def declared_size(name: str, size_field: bytes, data: bytes = b"") -> bytes:
    """A regular member whose header's size field is `size_field` as written (12 bytes: octal,
    base-256, negative, garbage), followed by `data`."""
    header = bytearray(regular(name, b"")[-tarfile.BLOCKSIZE:])
    header[124:136] = size_field[:12].ljust(12, b"\0")
    return with_checksum(bytes(header)) + padded(data)


def long_header(kind: bytes, size: int, data: bytes = b"") -> bytes:
    """A GNU long-name (`L`) or long-link (`K`) block, or a PAX record block (`x`, `g`), declaring
    `size` bytes and carrying `data`."""
    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = kind, 0
    header = bytearray(info.tobuf(format=tarfile.USTAR_FORMAT))
    header[124:136] = octal(size) if size < 8 ** 11 else b"\x80" + size.to_bytes(11, "big")
    return with_checksum(bytes(header)) + padded(data)


def gzip_tar(*blocks: bytes, end: bool = True) -> bytes:
    raw = b"".join(blocks) + (b"\0" * 2 * tarfile.BLOCKSIZE if end else b"")
    return gzip.compress(raw, mtime=0)


def chart_archive(*members: bytes, top: str = "c") -> bytes:
    """A chart archive: Chart.yaml and a template, then `members`."""
    return gzip_tar(regular(f"{top}/Chart.yaml", CHART_YAML), regular(f"{top}/templates/cm.yaml", CONFIG_MAP),
                    *members)


# --- the archive generator -----------------------------------------------------------------------


def _size(rng: random.Random) -> int:
    return rng.choice([0, 1, 511, 512, 4 * MIB - 1, 4 * MIB, 4 * MIB + 1, 63 * MIB, 64 * MIB, 64 * MIB + 1,
                       8 ** 11 - 1, 8 ** 11, 2 ** 40, 2 ** 63 - 1, rng.randint(0, 2 ** 34)])


def _name(rng: random.Random, top: str) -> str:
    choice = rng.random()
    if choice < 0.6:
        return f"{top}/{rng.choice(['templates', 'files', 'charts', 'crds', ''])}/{rng.randint(0, 999)}.yaml"
    if choice < 0.75:
        return f"{top}/templates/" + "n" * rng.choice([90, 100, 101, 155, 156, 255, 256, 1000, 5000])
    return rng.choice([f"{top}/../x.yaml", "/etc/x.yaml", "C:/x.yaml", f"{top}\\templates\\w.yaml", f"{top}/./a",
                       f"{top}//b", "./c/Chart.yaml", f"{top}/templates/\u202e.yaml", f"{top}/templates/\x00a",
                       top, f"{top}/", ""])


KINDS = 14


def _member(rng: random.Random, top: str, depth: int, kind: int | None = None, size: int | None = None) -> bytes:
    """One member of kind `kind` (random if None); `size`: what it declares, where it declares one
    (given: one of many alike, named plainly, so that no name stops the archive before they add up)."""
    name = _name(rng, top) if size is None else f"{top}/files/{rng.getrandbits(64):x}"
    kind = rng.randrange(KINDS) if kind is None else kind
    size = _size(rng) if size is None else size
    if kind == 0:
        return gnu_sparse(name, size, rng.choice([b"", b"x" * rng.randint(1, 2000)]), rng.choice([0, 0, 1, 3, 40]))
    if kind == 1:
        return pax_sparse(name, size, rng.choice(["0.0", "0.1", "1.0"]))
    if kind == 2:
        data = CONFIG_MAP * rng.randint(0, 20)
        return pax_size_override(name, data, rng.choice([len(data), len(data) + 1, max(0, len(data) - 1), size]))
    if kind == 3:
        field = rng.choice([octal(size % 8 ** 11), b"\x80" + (size % 2 ** 88).to_bytes(11, "big"),
                            b"\xff" * 12, b"\xff" + b"\x00" * 11, bytes(rng.randrange(256) for _ in range(12)),
                            b"77777777777\0", b"-1\0", b" " * 12])
        return declared_size(name, field, b"x" * rng.choice([0, 10, 600]))
    if kind == 4:
        data = "".join(rng.choice("ab/.\n") for _ in range(rng.choice([10, 2000]))).encode()
        return long_header(rng.choice([tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE,
                                       tarfile.XGLTYPE]), rng.choice([len(data), _size(rng)]), data) \
            + regular(name, b"x")
    if kind == 5:
        target = rng.choice(["cm.yaml", "../../etc/passwd", "/etc/passwd", f"{top}/templates/cm.yaml", "..", "",
                             "a" * 300])
        return regular(name, b"", rng.choice([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]),
                       kind=rng.choice([tarfile.SYMTYPE, tarfile.LNKTYPE]), link=target)
    if kind == 6:
        return regular(name, b"", kind=rng.choice([tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE, b"V", b"M",
                                                   b"Z", tarfile.CONTTYPE, tarfile.DIRTYPE]))
    if kind == 7 and depth < 3:
        inner = hostile_archive(rng, depth + 1)
        return regular(f"{top}/charts/sub-{rng.randint(0, 9)}.1.0.tgz", inner)
    if kind == 8:  # many small members
        return b"".join(regular(f"{top}/files/{number}", b"x") for number in range(rng.choice([10, 300, 3000])))
    if kind == 9:  # a member near the budget, really written (zeros pack 1,000:1: the ratio check)
        size, unit = rng.choice([MIB, 4 * MIB - 100, 4 * MIB + 1]), rng.choice([b"\0", b"a", b"k: v\n"])
        return regular(name, (unit * (size // len(unit) + 1))[:size])
    if kind == 10:
        return regular(name, CONFIG_MAP, tarfile.PAX_FORMAT, {"path": _name(rng, top), "mtime": "1e999",
                                                              rng.choice(["hdrcharset", "uid", "x" * 50]): "9" * 30})
    return regular(name, rng.choice([CONFIG_MAP, CHART_YAML, b"{{ .Values.x }}\n", b"- a\n" * 50, b"\xff\xfe"]))


def hostile_archive(rng: random.Random, depth: int = 0) -> bytes:
    """A random hostile chart archive (gzip bytes), most of it small but declaring much."""
    top = rng.choice(["c", "sub", "x" * 120])
    blocks = [regular(f"{top}/Chart.yaml", CHART_YAML)] if rng.random() < 0.9 else []
    if rng.random() < 0.2:  # many of one kind: 20 sparse members of 4 MiB are what a budget must add up
        kind = rng.choice([kind for kind in range(KINDS) if kind not in (7, 8)])  # no archives of archives
        size = rng.choice([4 * MIB - 1, 4 * MIB, 63 * MIB, _size(rng)])
        count = 5 if kind == 9 else rng.choice([20, 60, 200])  # 5 real members of 4 MiB: over the total
        blocks += [_member(rng, top, depth + 3, kind, size) for _ in range(count)]
    else:
        blocks += [_member(rng, top, depth) for _ in range(rng.choice([0, 1, 2, 3, 5, 10, 30][:7 - 2 * depth]))]
    rng.shuffle(blocks)
    data = gzip_tar(*blocks, end=rng.random() < 0.9)
    damage = rng.random()
    if damage < 0.08:
        data = data[:rng.randrange(len(data) + 1)]  # truncated gzip
    elif damage < 0.12:
        position = rng.randrange(len(data))
        data = data[:position] + bytes([data[position] ^ (1 << rng.randrange(8))]) + data[position + 1:]
    elif damage < 0.15:
        data += gzip.compress(b"\0" * rng.choice([10, 1024, 5 * MIB]), mtime=0)  # a second gzip member
    elif damage < 0.17:
        data = gzip_tar(b"".join(blocks))[:10] + data[10:]  # another header
    return data


# --- the archive check ---------------------------------------------------------------------------


def peak_rss_mib() -> float:
    """This process's peak resident memory (MiB): since the last `reset_peak()` where Linux can
    reset it (`/proc/self/clear_refs`), else since it started."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MIB if sys.platform == "darwin" else peak / 1024


def reset_peak() -> float:
    """Make the peak the present resident memory where the kernel allows; the peak after."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")  # Linux: reset the peak resident set size to the current one
    except OSError:
        pass
    return peak_rss_mib()


_warmed: list[bool] = []


def _lint(path: Path):
    from kubelint_ports.engine import LintOptions, lint_paths
    from kubelint_ports.loading.budgets import Limits
    from kubelint_ports.policies import builtin_policies

    return lint_paths([str(path)], LintOptions(limits=Limits(max_file_mib=FUZZ_FILE_MIB)),
                      policies=builtin_policies())


def check_archive(data: bytes, scratch: Path) -> float:
    """Lint `data` as `chart.tgz`; AssertionError on an exception, an internal diagnostic, or the
    peak memory growing past the archive budget (4 x max-file-mib) and some slack. On Linux the peak
    is reset before the lint; elsewhere it is the process's, and an input below an earlier peak
    cannot show. Returns the growth (MiB)."""
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / "chart.tgz"
    if not _warmed:  # the first lint imports the pipeline: not the archive's doing
        path.write_bytes(chart_archive())
        _lint(path)
        _warmed.append(True)
    path.write_bytes(data)
    before = reset_peak()
    try:
        report = _lint(path)
    except Exception as error:  # noqa: BLE001 (that is the finding)
        raise AssertionError(f"lint_paths raised {type(error).__name__}: {str(error)[:300]}") from error
    grown = peak_rss_mib() - before
    internal = [d.message for d in report.diagnostics if d.internal]
    assert not internal, f"internal error: {internal[0][:300]}"
    bound = 4 * FUZZ_FILE_MIB + RSS_SLACK_MIB
    assert grown <= bound, f"peak memory grew by {grown:.0f} MiB (bound {bound} MiB) on a {len(data):,}-byte archive"
    return grown


# --- repository configurations -------------------------------------------------------------------

LIMIT_NAMES = ("max-depth", "max-aliases", "max-nodes", "max-file-mib", "helm-seconds", "helm-output-mib",
               "helm-memory-mib", "kustomize-seconds", "kustomize-memory-mib", "kustomize-generators",
               "input-seconds")


def _limit_value(rng: random.Random) -> str:
    """A value as YAML text: in and out of range, huge, negative, text, NaN, infinities."""
    return rng.choice([
        str(rng.randint(1, 100)), str(rng.randint(1, 10 ** 6)), str(rng.randint(-10, 0)), "0", "1", "0.05", "0.1",
        "0.5", "1.5", "10", "10.0", "200", "201", "256", "257", "300", "301", "500", "501", "512", "1000", "1001",
        "4096", "86400", "86401", "1000000", "500000", "500001", "1000000000", "100000000000", "1e10", "1.0e+10",
        "1.0e+3", "9" * 400, "-" + "9" * 30, ".nan", ".NaN", ".inf", "-.inf", "+.inf", "nan", "inf", "true", "no",
        "null", "~", "''", '"12"', '"abc"', "[1]", "{a: 1}", "0x10", "0o17", "017", "1_000", "0b11", "!!str 5",
        "!!float 5", "!!int 1e3", "&a 5", "2001-01-01", "1:30", str(2 ** 63), str(2 ** 64 + 1), "-0", "+5",
    ])


def repository_config(rng: random.Random) -> str:
    """A configuration file's text with `limits:`: YAML, or (sometimes) pyproject.toml."""
    names = [rng.choice(LIMIT_NAMES + ("max_depth", "bogus", "Max-Depth")) for _ in range(rng.randint(0, 6))]
    if rng.random() < 0.2:
        values = {name: rng.choice(["1", "10", "1e10", "nan", "inf", "-inf", "-1", "0", "0.5", '"5"', "true",
                                    "100000000000", "3.0", "[1]", "9" * 40]) for name in names}
        body = "".join(f'"{name}" = {value}\n' for name, value in values.items())
        return f"[tool.kubelint-ports]\nfail-on = \"error\"\n\n[tool.kubelint-ports.limits]\n{body}"
    if rng.random() < 0.05:
        return "limits: " + rng.choice(["5", "[max-depth]", "null", "{}", "~", "'max-depth: 5'"]) + "\n"
    if rng.random() < 0.5:
        return "limits: {" + ", ".join(f"{name}: {_limit_value(rng)}" for name in names) + "}\n"
    return "limits:\n" + "".join(f"  {name}: {_limit_value(rng)}\n" for name in names)


def check_repository_config(text: str, scratch: Path) -> None:
    """The run's settings from `text` as the repository's configuration: refused (ConfigError or
    ValueError, what the CLI turns into exit 2), or limits never above the defaults and within
    their ranges, with the values the file gave where it gave valid ones."""
    from kubelint_ports.config import ConfigError
    from kubelint_ports.loading import budgets
    from kubelint_ports.settings import CommandLine, resolve

    scratch.mkdir(parents=True, exist_ok=True)
    name = "pyproject.toml" if text.startswith("[tool.") else ".kubelint-ports.yaml"
    for stale in ("pyproject.toml", ".kubelint-ports.yaml"):
        (scratch / stale).unlink(missing_ok=True)
    path = scratch / name
    path.write_text(text, encoding="utf-8")
    (scratch / "m.yaml").write_bytes(CONFIG_MAP)
    try:
        settings = resolve(CommandLine(config=str(path), paths=(str(scratch / "m.yaml"),)))
    except (ConfigError, ValueError):
        return
    except Exception as error:  # noqa: BLE001 (that is the finding)
        raise AssertionError(f"resolve raised {type(error).__name__}: {str(error)[:300]}") from error
    limits = settings.options.limits
    for key in LIMIT_NAMES:
        field = key.replace("-", "_")
        value, default = getattr(limits, field), getattr(budgets.DEFAULT_LIMITS, field)
        low = budgets.RANGES[field][0]
        assert isinstance(value, type(default)), f"{key}: {value!r} is not a {type(default).__name__}"
        assert low <= value <= default, f"{key}: {value!r} from {text!r} is outside {low} to the default {default}"
    given = settings.config.get("limits") or {}
    for key, value in given.items():
        assert getattr(limits, key.replace("-", "_")) == value, f"{key}: {value!r} given, not used"


# --- on its own ----------------------------------------------------------------------------------


def main() -> None:
    import argparse
    import tempfile
    import time

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--surface", choices=("archive", "repository-config", "both"), default="both")
    arguments = parser.parse_args()
    surfaces = ("archive", "repository-config") if arguments.surface == "both" else (arguments.surface,)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="kubelint-ports-fuzz-budgets-") as directory:
        for surface in surfaces:
            rng = random.Random(f"{surface}-{arguments.seed}")
            started, grown = time.monotonic(), 0.0
            for number in range(arguments.count):
                scratch = Path(directory) / surface
                try:
                    if surface == "archive":
                        grown = max(grown, check_archive(hostile_archive(rng), scratch))
                    else:
                        check_repository_config(repository_config(rng), scratch)
                except AssertionError as error:
                    failures += 1
                    print(f"FAIL {surface} #{number}: {error}", flush=True)
            print(f"{surface}: {arguments.count} inputs, {time.monotonic() - started:.1f} s"
                  + (f", peak memory grew by at most {grown:.0f} MiB in one lint" if surface == "archive" else ""),
                  flush=True)
    print(f"{failures} failures")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
