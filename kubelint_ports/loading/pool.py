"""Large inputs read by worker processes: each composes whole files with a fresh document reader,
and the documents and the reader's pieces travel back (pickled), never node trees.

Files are cut into contiguous batches of about equal size, in input order; the caller absorbs
each batch's result at the batch's place in the input, so the output is the same whatever the
number of workers. Small inputs stay in-process: starting workers costs more than they save
below `POOL_MIN_BYTES` (and a pre-commit run on a few files must start as fast as before).
Charts and standard input are always read in-process.
"""

from __future__ import annotations

import gc
import os
import stat
import sys
from typing import TYPE_CHECKING

from kubelint_ports.loading import STDIN, DocumentReader, LoadResult, budgets, load_file, read_guarded

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


class Workers:
    """A process pool shared by the loads of one run, started when a load first needs it."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self.executor: ProcessPoolExecutor | None = None

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)

    def batches(self, entries: list[str], helm, reader: DocumentReader) -> dict[int, tuple[Future, int]]:
        """Submit the regular files among `entries`, in contiguous batches of about equal size:
        {input position of a batch's first file: (future, number of files)}. Nothing when they
        are too small to gain from workers."""
        sizes: dict[int, int] = {}
        for position, path in enumerate(entries):
            if path == STDIN:
                continue
            try:
                status = os.stat(path)
            except OSError:
                continue  # reported by the in-process read
            if stat.S_ISREG(status.st_mode):  # not a chart directory (rendered in-process), a FIFO, a device
                sizes[position] = status.st_size
        total = sum(sizes.values())
        if total < POOL_MIN_BYTES:
            return {}
        target = max(MIN_BATCH_BYTES, total // (self.jobs * BATCHES_PER_WORKER))
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

            self.executor = ProcessPoolExecutor(max_workers=self.jobs, mp_context=_context(), initializer=gc.disable)
        return {first: (self.executor.submit(read_batch, paths, helm, reader.fresh(), budgets.current()), len(paths))
                for first, paths in batches}


def read_batch(paths: list[str], helm, reader: DocumentReader, limits: budgets.Limits
               ) -> tuple[LoadResult, DocumentReader]:
    """One batch, in a worker, under the run's budgets (a spawned worker would not inherit them)."""
    result = LoadResult()
    with budgets.applied(limits):
        for path in paths:
            read_guarded(path, result, lambda: load_file(path, result, helm=helm, reader=reader))
    return result, reader


def _context():
    import multiprocessing

    # fork inherits the imported modules (no start-up cost); elsewhere fork is unsafe or absent.
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")
