"""Packaged charts (`helm package` archives: `mychart-1.2.3.tgz`, `charts/*.tgz`): read once,
checked, held in memory.

An archive is read from one read of its file, under the budgets, before Helm sees it: it must be
gzip (as Helm's loader requires); a member unpacks to at most `max-file-mib`, and the whole archive
to at most `ARCHIVE_TOTAL_FACTOR` times that, archives inside it included (counted on the bytes
gzip actually produces, not on what headers declare); at most `MAX_ARCHIVE_MEMBERS` members and
`MAX_ARCHIVE_RATIO` times its packed size (a gzip bomb stops there, after a few MiB, not at the
total budget); no member has an absolute path, a `..` or a drive letter, no link leads out of it,
nothing is a device or a FIFO. Members whose size is not what their data is are refused at their
header, before any data is read: sparse files (GNU type `S`, PAX `GNU.sparse.*`: 577 packed bytes
of them held 1.36 GB once tarfile filled their holes), a PAX `size` that overrides the header's
(readers disagree on where such a member ends), and headers of long names or PAX records over
`MAX_HEADER_DATA`. Archives inside it (`charts/*.tgz`) are read the same way, up to
`MAX_NESTED_ARCHIVES` deep. Nothing is unpacked to disk: Helm renders a private copy of the bytes
checked (`private_copy`, in a temporary directory removed after the render), never the file again.

A member is shown as `<archive>:<member>` (`cilium-1.20.0.tgz:cilium/templates/agent/daemonset.yaml`),
and a finding in it as `cilium-1.20.0.tgz:cilium/templates/agent/daemonset.yaml:12:9`: the archive
a user can open, the member's path as `tar -tzf` lists it, the line. An archive inside an archive
adds its own `:<member>`.
"""

from __future__ import annotations

import gzip
import io
import os
import posixpath
import re
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import yaml

from kubelint_ports.loading import budgets, files
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.helm.worker import SCHEMA_FILE

GZIP_MAGIC = b"\x1f\x8b"
MAX_ARCHIVE_MEMBERS = 10_000  # members of one chart archive, those of archives inside it included
MAX_NESTED_ARCHIVES = 4  # archives inside archives (`charts/*.tgz` of a packaged subchart)
ARCHIVE_TOTAL_FACTOR = 4  # an archive and those inside it unpack to at most 4 x max-file-mib in all
# A GNU long name or a PAX record is read whole by tarfile before we see its member: Go's
# archive/tar (Helm's reader) refuses one over 1 MiB, and so do we.
MAX_HEADER_DATA = budgets.MIB
_HEADER_TYPES = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
                 tarfile.SOLARIS_XHDTYPE)
# Bytes unpacked per byte packed. The 433 chart archives of the real-chart corpus pack 4 to 11
# times; gzip reaches 1,032. Under RATIO_FLOOR unpacked, any ratio passes (a small chart of
# repeated text is no bomb).
MAX_ARCHIVE_RATIO = 100
RATIO_FLOOR = budgets.MIB
CHART_FILE = "Chart.yaml"
_DRIVE = re.compile(r"^[A-Za-z]:/")
_CACHED_ARCHIVES = 16  # archives kept read while one chart loads (it, its packaged subcharts)


class ArchiveError(ValueError):
    """An archive that must not be rendered: the message says why (no path: the caller's)."""


@dataclass(eq=False)
class ChartArchive:
    """A chart archive as checked: its bytes (what Helm renders) and its members by Helm's name
    for them (the path below the archive's top directory, `templates/x.yaml`)."""

    path: str  # the archive file, absolute
    inner: str  # inside another archive: `:<member>` of it there (`:a/charts/b-1.0.0.tgz`), else ""
    data: bytes
    members: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # Helm's name -> (member, content)
    nested: dict[str, ChartArchive] = field(default_factory=dict)  # Helm's name of a charts/*.tgz -> it
    unpacked: int = 0  # bytes it unpacked to, with the archives inside it (read from a file: `chart_archive`)

    @property
    def shown(self) -> str:
        """The archive as shown to the user (`charts/db-1.0.0.tgz`, `a.tgz:a/charts/b-1.0.0.tgz`)."""
        return display_path(self.path) + self.inner

    def member_path(self, name: str, absolute: bool = False) -> str:
        """`<archive>:<member>` of the member Helm calls `name`."""
        return f"{self.path + self.inner if absolute else self.shown}:{self.members[name][0]}"

    def content(self, name: str) -> bytes | None:
        found = self.members.get(name)
        return found[1] if found is not None else None

    @property
    def name(self) -> str:
        """The chart's name (Chart.yaml's, else the top directory's), the default release name."""
        top = next(iter(self.members.values()), ("chart", b""))[0].split("/")[0]
        return str(parse_chart_yaml(self.content(CHART_FILE)).get("name") or top)

    def schemas(self) -> Iterator[tuple[str, bytes]]:
        """(`<archive>:<member>`, content) of every values schema, in archives inside it too."""
        for name in sorted(self.members):
            if name.rsplit("/", 1)[-1] == SCHEMA_FILE:
                yield self.member_path(name), self.members[name][1]
        for name in sorted(self.nested):
            yield from self.nested[name].schemas()


@dataclass(frozen=True, eq=False)
class ArchivePlace:
    """A chart inside an archive: the archive and the directory of the chart in Helm's names
    ("" for the archive's own chart, `charts/db/` for a subchart kept as a directory)."""

    archive: ChartArchive
    base: str = ""

    def file(self, relative: str) -> tuple[str, str, bytes] | None:
        """(shown path, absolute path, content) of a file of this chart (`templates/x.yaml`)."""
        name = self.base + relative
        content = self.archive.content(name)
        if content is None:
            return None
        return self.archive.member_path(name), self.archive.member_path(name, absolute=True), content

    def metadata(self) -> dict:
        return parse_chart_yaml(self.archive.content(self.base + CHART_FILE))

    def subchart(self, name: str) -> ArchivePlace | None:
        """The subchart Helm names `name` (its directory, its Chart.yaml name or an alias of it),
        kept as a directory in this archive or as an archive inside it."""
        prefix = self.base + "charts/"
        entries: dict[str, str] = {}  # entry of charts/ -> "dir" or "archive"
        for member in self.archive.members:
            if member.startswith(prefix):
                entry, _, rest = member[len(prefix):].partition("/")
                if rest == CHART_FILE:
                    entries[entry] = "dir"
                elif not rest and prefix + entry in self.archive.nested:
                    entries[entry] = "archive"
        wanted = {name, *aliased(self.metadata(), name)}
        chosen = pick_subchart(name, wanted, sorted(entries.items()), lambda entry: str(
            parse_chart_yaml(self.archive.content(f"{prefix}{entry}/{CHART_FILE}")).get("name") or entry))
        if chosen is None:
            return None
        if entries[chosen] == "archive":
            return ArchivePlace(self.archive.nested[prefix + chosen])
        return ArchivePlace(self.archive, f"{prefix}{chosen}/")


def pick_subchart(name: str, wanted: set[str], entries: list[tuple[str, str]], chart_name) -> str | None:
    """The entry of a `charts/` folder holding the subchart Helm names `name`: the directory of that
    name, else a directory whose chart (`chart_name(entry)`) is named so or aliased to it, else an
    archive `<name>-<version>.tgz`. `entries`: (entry, "dir" or "archive"), sorted."""
    kinds = dict(entries)
    if kinds.get(name) == "dir":
        return name
    for entry, kind in entries:
        if kind == "dir" and chart_name(entry) in wanted:
            return entry
        if kind == "archive" and entry.endswith(".tgz") and any(
                re.match(re.escape(w) + r"-v?\d", entry) for w in wanted):
            return entry
    return None


def aliased(metadata: dict, alias: str) -> list[str]:
    """Dependency names a Chart.yaml declares under `alias`."""
    dependencies = metadata.get("dependencies") or []
    return [str(d.get("name")) for d in dependencies if isinstance(d, dict) and d.get("alias") == alias]


def parse_chart_yaml(data: bytes | None) -> dict:
    """Chart.yaml as plain data, within the budgets; {} when absent or unreadable."""
    if data is None:
        return {}
    try:
        parsed = yt.to_plain(budgets.compose(data))
    except (yaml.YAMLError, yt.FieldTypeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


# --- reading -------------------------------------------------------------------------------------


class _Budget:
    """What one archive (and the archives inside it) may unpack to, shared by all of them."""

    def __init__(self) -> None:
        self.member_limit = budgets.current().max_file_bytes
        self.limit = ARCHIVE_TOTAL_FACTOR * self.member_limit
        self.unpacked = 0
        self.members = 0

    def member_too_big(self) -> str:
        return f"more than {self.member_limit // budgets.MIB} MiB once unpacked (limit max-file-mib)"

    def too_big(self) -> str:
        return (f"more than {self.limit // budgets.MIB} MiB once unpacked, archives inside it included "
                f"({ARCHIVE_TOTAL_FACTOR} x limit max-file-mib)")


class _Header(tarfile.TarInfo):
    """A member's header as tarfile parses it, refused before tarfile reads what follows it when
    that would be sparse data, a negative size, or an oversized long name or PAX record. Keeps the
    size the header itself declares (`declared`), which a PAX record may override."""

    @classmethod
    def frombuf(cls, buf, encoding, errors):
        header = super().frombuf(buf, encoding, errors)
        header.declared = header.size
        shown = files.excerpt(header.name, 200)
        if header.type == tarfile.GNUTYPE_SPARSE:
            raise ArchiveError(f"member {shown} is a sparse file (GNU type S); a chart archive holds none")
        if header.size < 0:
            raise ArchiveError(f"member {shown} declares a negative size")
        if header.type in _HEADER_TYPES and header.size > MAX_HEADER_DATA:
            raise ArchiveError(f"member {shown} is a long name or PAX record of {header.size:,} bytes, over "
                               f"{MAX_HEADER_DATA // budgets.MIB} MiB")
        return header


class _Unpacking(io.RawIOBase):
    """The decompressed stream of one archive, counted as it is read: past the shared total, or
    past MAX_ARCHIVE_RATIO times its packed size, reading stops with an ArchiveError. Every byte a
    member's content is made of comes through here (sparse members, whose holes would not, are
    refused), so the count is what unpacking really produces."""

    def __init__(self, packed: bytes, budget: _Budget):
        self.stream = gzip.GzipFile(fileobj=io.BytesIO(packed))
        self.packed = len(packed)
        self.unpacked = 0
        self.budget = budget

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        chunk = self.stream.read(min(size, budgets.MIB) if size is not None and size >= 0 else budgets.MIB)
        self.unpacked += len(chunk)
        self.budget.unpacked += len(chunk)
        if self.budget.unpacked > self.budget.limit:
            raise ArchiveError(self.budget.too_big())
        if self.unpacked > max(RATIO_FLOOR, MAX_ARCHIVE_RATIO * self.packed):
            raise ArchiveError(f"unpacks to more than {MAX_ARCHIVE_RATIO} times its size (a gzip bomb?)")
        return chunk


def read_archive(data: bytes, path: str, inner: str = "", budget: _Budget | None = None,
                 nesting: int = 0) -> ChartArchive:
    """The archive `data` of the file `path` (`inner`: its member path inside the archives there),
    checked (see the module's docstring); ArchiveError says what is wrong, naming the member."""
    budget = budget or _Budget()
    if data[:2] != GZIP_MAGIC:
        raise ArchiveError("not a gzip-compressed chart archive (Helm reads only those)")
    archive = ChartArchive(os.path.abspath(path), inner, data)
    try:
        with tarfile.open(fileobj=_Unpacking(data, budget), mode="r|", tarinfo=_Header) as members:
            for member in members:
                add_member(archive, members, member, budget, nesting)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise ArchiveError(f"not a readable chart archive ({files.shortened(str(error))})") from None
    return archive


def add_member(archive: ChartArchive, members: tarfile.TarFile, member: tarfile.TarInfo, budget: _Budget,
               nesting: int) -> None:
    budget.members += 1
    if budget.members > MAX_ARCHIVE_MEMBERS:
        raise ArchiveError(f"more than {MAX_ARCHIVE_MEMBERS:,} members")
    shown = files.excerpt(member.name, 200)
    name = member.name.replace("\\", "/")  # as Helm reads an archive written on Windows
    parts = name.split("/")
    if name.startswith("/") or _DRIVE.match(name) or ".." in parts:
        raise ArchiveError(f"member {shown} has a path leaving the archive")
    if member.isdir():
        return
    helm_name = "/".join(part for part in parts[1:] if part not in ("", "."))
    if member.issym() or member.islnk():
        target = member.linkname.replace("\\", "/")  # a symlink's is relative to its directory, a hard link's to the top
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(name), target) if member.issym() else target)
        if target.startswith("/") or _DRIVE.match(target) or joined == ".." or joined.startswith("../"):
            raise ArchiveError(f"member {shown} is a link to {files.excerpt(member.linkname, 200)}, "
                               "outside the archive")
        if helm_name:
            archive.members[helm_name] = (name, b"")  # Helm reads a link in an archive as an empty file
        return
    if not member.isfile():
        raise ArchiveError(f"member {shown} is not a file (a device, FIFO or other special file)")
    check_size(member, shown, budget)
    if not helm_name:
        raise ArchiveError(f"member {shown} is outside the chart's directory")
    content = members.extractfile(member).read()
    if len(content) > budget.member_limit:  # cannot be (its size was checked, no holes): never hold more
        raise ArchiveError(f"member {shown} is {budget.member_too_big()}")
    archive.members[helm_name] = (name, content)
    if helm_name.endswith(".tgz") and helm_name.rsplit("/", 2)[-2:-1] == ["charts"]:
        if nesting >= MAX_NESTED_ARCHIVES:
            raise ArchiveError(f"archives nested deeper than {MAX_NESTED_ARCHIVES} levels")
        try:
            archive.nested[helm_name] = read_archive(content, archive.path, f"{archive.inner}:{name}", budget,
                                                     nesting + 1)
        except ArchiveError as error:
            raise ArchiveError(f"{name}: {error}") from None


def check_size(member: tarfile.TarInfo, shown: str, budget: _Budget) -> None:
    """Refuse, before its data is read, a member whose content is not simply the bytes its header
    declares, or is more than a member may unpack to."""
    if member.sparse is not None or any(key.startswith("GNU.sparse.") for key in member.pax_headers):
        raise ArchiveError(f"member {shown} is a sparse file (PAX GNU.sparse); a chart archive holds none")
    declared = getattr(member, "declared", member.size)
    if member.size != declared:
        raise ArchiveError(f"member {shown} has a PAX size ({member.size:,} bytes) other than its header's "
                           f"({declared:,}): readers would disagree on where it ends")
    if member.size > budget.member_limit:
        raise ArchiveError(f"member {shown} is {budget.member_too_big()}")


_ARCHIVES: dict[tuple, ChartArchive] = {}


def chart_archive(path: str) -> ChartArchive:
    """The archive at `path`, read once while a chart loads (`forget_archives` after it; again
    when the file changed); ArchiveError when it must not be rendered, OSError when it cannot be
    read."""
    status = os.stat(path)
    cache_key = (os.path.abspath(path), status.st_mtime_ns, status.st_size, budgets.current())
    found = _ARCHIVES.get(cache_key)
    if found is None:
        limit = budgets.current().max_file_bytes
        data = files.read_file(path, limit)
        if len(data) > limit:
            raise ArchiveError(f"over {limit // budgets.MIB} MiB (limit max-file-mib)")
        budget = _Budget()
        found = read_archive(data, path, budget=budget)
        found.unpacked = budget.unpacked
        # What the cache holds stays within one archive's budget too: a chart with many
        # `charts/*.tgz` files must not hold them all (the oldest is read again if asked for).
        while _ARCHIVES and (len(_ARCHIVES) >= _CACHED_ARCHIVES or found.unpacked + sum(
                archive.unpacked for archive in _ARCHIVES.values()) > budget.limit):
            del _ARCHIVES[next(iter(_ARCHIVES))]
        _ARCHIVES[cache_key] = found
    return found


def forget_archives() -> None:
    """Let the archives read go (a chart's load is done: what it still needs, it holds)."""
    _ARCHIVES.clear()


@contextmanager
def private_copy(data: bytes, name: str) -> Iterator[str]:
    """`data` written to `name` in a new private temporary directory, removed when the block ends
    whatever happens in it: what Helm renders is the bytes checked, not the file read again."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kubelint-ports-chart-") as directory:
        path = os.path.join(directory, os.path.basename(name) or "chart.tgz")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        yield path


__all__ = ["ArchiveError", "ArchivePlace", "ChartArchive", "chart_archive", "forget_archives", "private_copy",
           "read_archive"]
