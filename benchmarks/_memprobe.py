"""Run ``loadtest`` with a memory probe inside it: where a soak's RSS creep lives.

RSS alone cannot tell a leak from fragmentation. Every ``MEMPROBE_EVERY_S``
seconds this greenlet writes one JSON line to ``MEMPROBE_PATH`` with:

* the process's RSS (``/proc/self/statm``);
* glibc's own view (``mallinfo2``): bytes in use by malloc versus bytes held
  in its arenas but free (growth of the second with a flat first is
  fragmentation, not a leak), and mmapped bytes;
* pyarrow's memory pool: bytes allocated now, and the pool's backend;
* Python's allocated blocks (``sys.getallocatedblocks``: every live object,
  strings and floats included), its gc-tracked objects by type (the 25
  commonest) and their number: growth here is a Python-level leak.

It imports Locust first, exactly as ``loadtest run`` does, so that gevent's
patches go in before any thread or socket, and the probe is a greenlet that
yields to the timing loop between samples. A benchmark helper, never imported
by the package.

    python benchmarks/_memprobe.py run SCENARIO --out DIR   (same arguments as 'loadtest')
"""

from __future__ import annotations

import locust  # noqa: F401  (gevent's patches go first, as in 'loadtest run')

import collections
import ctypes
import gc
import json
import os
import sys
import time

import gevent


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]


def _sample(t0: float, libc: ctypes.CDLL | None) -> dict:
    import pyarrow as pa

    page = os.sysconf("SC_PAGE_SIZE")
    with open("/proc/self/statm") as fh:
        rss = int(fh.read().split()[1]) * page
    out: dict = {"t_s": round(time.monotonic() - t0, 1), "rss_mb": round(rss / 1e6, 2)}
    if libc is not None:
        m = libc.mallinfo2()
        out.update(malloc_in_use_mb=round(m.uordblks / 1e6, 2), malloc_free_in_arenas_mb=round(m.fordblks / 1e6, 2),
                   malloc_arena_mb=round(m.arena / 1e6, 2), malloc_mmap_mb=round(m.hblkhd / 1e6, 2))
    pool = pa.default_memory_pool()
    out.update(arrow_pool=pool.backend_name, arrow_allocated_mb=round(pool.bytes_allocated() / 1e6, 2),
               arrow_max_mb=round(pool.max_memory() / 1e6, 2))
    out["py_blocks"] = sys.getallocatedblocks()  # pymalloc's live blocks: untracked objects (str, float, bytes) too
    objects = gc.get_objects()
    out["gc_objects"] = len(objects)
    out["types"] = dict(collections.Counter(type(o).__name__ for o in objects).most_common(25))
    del objects
    return out


def _probe(path: str, every_s: float) -> None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):
        libc = None
    t0 = time.monotonic()
    while True:
        with open(path, "a") as fh:
            fh.write(json.dumps(_sample(t0, libc)) + "\n")
        gevent.sleep(every_s)


def main() -> int:
    gevent.spawn(_probe, os.environ["MEMPROBE_PATH"], float(os.environ.get("MEMPROBE_EVERY_S", "60")))
    from loadtest.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
