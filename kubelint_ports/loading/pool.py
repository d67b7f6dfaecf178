"""Large inputs read by worker processes: each composes whole files with a fresh document reader,
and the documents and the reader's pieces travel back (pickled), never node trees.

Files are cut into contiguous batches of about equal size, in input order; the caller absorbs
each batch's result at the batch's place in the input, so the output is the same whatever the
number of workers. Small inputs stay in-process: starting workers costs more than they save
below `POOL_MIN_BYTES` (and a pre-commit run on a few files must start as fast as before).
Charts and standard input are always read in-process.

By default (`--jobs 0`) workers start only when the input is large AND a second processor is
free: of the processors this process may use (`os.sched_getaffinity`), those the load leaves
idle. On a busy runner workers only add the cost of shipping documents back (measured: +19% CPU
and no second core), so there the input is read in this process. The load is the one-minute load
average, or, when lower, the processes other than this one running right now (Linux
`/proc/loadavg`, the fewest of three looks 5 ms apart): the average lags by a minute, so a run that follows another (a benchmark loop,
an earlier CI step) would see its predecessor's load on a machine that is idle now, while a job
that keeps a processor busy is running at every instant. `--jobs N` asks for N workers whatever
the load. `Workers.started` and `Workers.why` say what happened.
"""

from __future__ import annotations

import gc
import os
import stat
import sys
from typing import TYPE_CHECKING

from kubelint_ports.loading.paths import STDIN
from kubelint_ports.loading.yaml_files.documents import DocumentReader, LoadResult, read_guarded
from kubelint_ports.loading import budgets, file_cache, files, read_log
from kubelint_ports.loading.yaml_files.manifests import load_file

if TYPE_CHECKING:  # imported when a pool starts: a small run never pays for multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

POOL_MIN_BYTES = 4 * 1024 * 1024
BATCHES_PER_WORKER = 6  # enough for the workers to finish close together
MIN_BATCH_BYTES = 256 * 1024


def default_jobs() -> int:
    """The processors this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The one-minute load average (runnable processes), or None where the system has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def running_others(samples: int = 3, interval: float = 0.005) -> int | None:
    """Processes (threads) running or runnable right now besides this one (the kernel's count in
    /proc/loadavg), or None where there is no such file: the fewest of a few looks `interval`
    seconds apart, so that a process that woke for a moment (a shell, a monitor's sampling thread)
    does not count as a busy processor, while a job that keeps one busy is seen at every look."""
    import time

    fewest = None
    for sample in range(samples):
        if sample:
            time.sleep(interval)
        try:
            with open("/proc/loadavg", encoding="ascii") as handle:
                now = max(0, int(handle.read().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            return None
        fewest = now if fewest is None else min(fewest, now)
        if fewest == 0:
            break
    return fewest


def free_processors(processors: int, load: float | None) -> int:
    """How many of `processors` are idle under `load` (rounded to the nearest): this process runs
    on one of them, so a worker pool helps only when this is 2 or more. Unknown load: all."""
    if load is None:
        return processors
    return max(1, min(processors, int(processors - load + 0.5)))


class Workers:
    """A process pool shared by the loads of one run, started when a load first needs it.
    `jobs`: the workers asked for (`--jobs N`), or 0: as many as processors are free, none when
    only one is (decided when an input is large enough to want them)."""

    def __init__(self, jobs: int = 0):
        self.jobs = jobs
        self.executor: ProcessPoolExecutor | None = None
        self.started = 0  # worker processes started
        self.why = ""  # why none, or how many and why that many
        self.chosen: int | None = None  # the pool's size, once decided

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)

    def batches(self, entries: list[str], helm, reader: DocumentReader,
                walked: set[str] = frozenset()) -> dict[int, tuple[Future, int]]:
        """Submit the regular files among `entries`, in contiguous batches of about equal size:
        {input position of a batch's first file: (future, number of files)}. Nothing when they
        are too small to gain from workers. `walked`: the entries a directory walk found to be
        regular files, no symlinks (`inputs.discover`)."""
        sizes: dict[int, int] = {}
        cache = file_cache.active()  # hook: a file the cache holds is read from it, in this process
        # A cache kept in this process's memory (the language server's) is handed each file's
        # pieces as the workers read them (`read_batch`'s `remember`): its next run reads none again.
        remember = getattr(cache, "adopt", None) is not None
        planned = {os.path.realpath(path) for path in files.PLANNED} if files.PLANNED else None
        for position, path in enumerate(entries):
            if path == STDIN or (cache is not None and cache.has_entry(path, helm, reader)):
                continue
            if planned and os.path.realpath(path) in planned:
                continue  # an editor's text, laid over this process's reads only
            try:
                status = os.stat(path)
            except OSError:
                continue  # reported by the in-process read
            if stat.S_ISREG(status.st_mode):  # not a chart directory (rendered in-process), a FIFO, a device
                sizes[position] = status.st_size
        total = sum(sizes.values())
        if total < POOL_MIN_BYTES:
            if not self.why:
                self.why = f"the input is under {POOL_MIN_BYTES // 2**20} MiB"
            return {}
        if self.executor is None and sys.platform.startswith("linux") and not _FORK_SERVER[0] \
                and threads_forbid_fork():  # a pool started already forked its workers: the thread it runs is its own
            self.why = "this process runs other threads: it forks no workers"
            return {}
        jobs = self.workers_wanted()
        if jobs < 2 and self.jobs <= 0:
            return {}
        target = max(MIN_BATCH_BYTES, total // (jobs * BATCHES_PER_WORKER))
        batches: list[tuple[int, list[str]]] = []
        filled = target
        for position, path in enumerate(entries):
            if position not in sizes:
                filled = target  # a batch never spans an entry read in-process
                continue
            if filled >= target:
                batches.append((position, []))
                filled = 0
            batches[-1][1].append(path)
            filled += sizes[position]
        if self.executor is None:
            from concurrent.futures import ProcessPoolExecutor

            self.executor = ProcessPoolExecutor(max_workers=jobs, mp_context=_context(), initializer=gc.disable)
            self.started = jobs
        for _, paths in batches:  # hook: the run memo lists the files read where it cannot see them
            read_log.read_elsewhere(paths)
        return {first: (self.executor.submit(read_batch, paths, helm, reader.fresh(), budgets.current(),
                                             {path for path in paths if path in walked},
                                             cache.directory if cache is not None else None, remember), len(paths))
                for first, paths in batches}

    def workers_wanted(self) -> int:
        """The size of the pool, decided once per run when a large input first wants it."""
        if self.chosen is None:
            if self.jobs > 0:
                self.chosen, self.why = self.jobs, f"--jobs {self.jobs}"
            else:  # the default: only on processors nobody else is using
                processors, load, now = default_jobs(), load_average(), running_others()
                busy = load if now is None else now if load is None else min(load, now)
                self.chosen = free_processors(processors, busy)
                load_text = (f", load average {load:.2f}" if load is not None else "") + (
                    f", {now} runnable besides this run" if now is not None else "")
                self.why = (f"no second processor free: {processors} processors{load_text}" if self.chosen < 2 else
                            f"{self.chosen} of {processors} processors free{load_text}")
        return self.chosen

    def summary(self) -> str:
        """What `--statistics`/`-v` say: how many worker processes read the input, and why; nothing
        for an input too small to share (every pre-commit run: a note there would be noise)."""
        if self.started:
            return f"input read by {self.started} worker processes ({self.why})"
        if not self.why or self.why.startswith("the input is under"):
            return ""
        return f"input read in this process ({self.why})"


def read_batch(paths: list[str], helm, reader: DocumentReader, limits: budgets.Limits,
               walked: set[str] = frozenset(), cache_dir: str | None = None, remember: bool = False
               ) -> tuple[LoadResult, DocumentReader, list | None]:
    """One batch, in a worker, under the run's budgets and file cache (a spawned worker would not
    inherit them; a forked one keeps the run's open cache). With `remember`, each file's pieces
    too (`memory_cache.Entry`s, the very objects the batch's result holds: pickled once), for the
    caller's cache in memory to adopt."""
    result = LoadResult()
    memory = None
    if remember:
        from kubelint_ports.loading.memory_cache import MemoryCache

        memory = MemoryCache()
        memory.start_run()
    cache = file_cache.kept(memory) if memory is not None else file_cache.applied(cache_dir)  # hook: file cache
    with budgets.applied(limits), cache, files.time_limits():
        for path in paths:
            read_guarded(path, result, lambda: load_file(path, result, helm=helm, reader=reader,
                                                         walked=path in walked))
    return result, reader, list(memory.entries.values()) if memory is not None else None


_FORK_SERVER = [False]  # may workers come from a fork server (`allow_fork_server`)


def allow_fork_server() -> None:
    """Let a process with other threads have workers, forked from a single-threaded fork server.
    For a process whose main module is safe to import in a worker (as `__mp_main__`, which every
    worker so started does): the language server's, which reads its input on a thread."""
    _FORK_SERVER[0] = True


def threads_forbid_fork() -> bool:
    """Whether this process runs other threads: a fork copies only the forking thread, and a lock
    another thread held then stays held in the child (a thread blocked reading standard input
    holds its buffer's lock, and a new worker closes standard input: measured, it hangs)."""
    import threading

    return threading.active_count() > 1


def _context():
    import multiprocessing

    # fork inherits the imported modules (no start-up cost); elsewhere fork is unsafe or absent.
    if sys.platform.startswith("linux"):
        if not threads_forbid_fork():
            return multiprocessing.get_context("fork")
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])  # the readers imported once, in the fork server
        return context
    return multiprocessing.get_context("spawn")
