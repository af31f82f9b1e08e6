"""Build llama.cpp's ``llama-server`` once per machine, for the real-server tests.

The only llama.cpp source reachable from CI is the copy vendored in the
``llama-cpp-python`` sdist on PyPI, so that is what we build: ``pip download`` the
pinned sdist, extract ``vendor/llama.cpp``, and compile only the ``llama-server``
target (CPU, Release, static, no network at build time: no prebuilt web UI, no
OpenSSL, no curl).  The binary is cached outside the clone, keyed by version, in
``$LOADTEST_CACHE`` (default ``~/.cache/loadtest``)/``llama-server/<version>/``, so
a fresh clone on the same machine reuses it and the 10–40 minute build happens once.

Usage: ``python tests/support/realserver/build_llama_server.py [--print-path]``.  Prints the
binary's path on the last line of stdout.  Concurrent callers wait on a lock file
rather than building twice.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

#: The llama-cpp-python sdist whose vendored llama.cpp we build.  Bump to upgrade.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"

CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    # Portable x86-64 (AVX2 etc. stay on): a cache shared by machines must not SIGILL.
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
]


def cache_root() -> Path:
    """Where built binaries live; outside any clone so every checkout shares them."""
    env = os.environ.get("LOADTEST_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "loadtest"


def binary_path(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """The cached ``llama-server`` for ``version`` (it may not exist yet)."""
    return cache_root() / "llama-server" / version / "llama-server"


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, check=True)


def _download_sdist(version: str, dest: Path) -> Path:
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
          "--dest", str(dest), f"llama-cpp-python=={version}"])
    found = sorted(dest.glob("llama_cpp_python-*.tar.gz"))
    if not found:
        raise SystemExit(f"pip download produced no llama-cpp-python sdist in {dest}")
    return found[0]


def _extract_vendor(sdist: Path, dest: Path) -> Path:
    """Extract only vendor/llama.cpp (the Python bindings are not needed)."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name + "/"
                   and "/.git/" not in m.name]
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse links and paths out of dest
            tar.extractall(dest, members=members, filter="data")
        else:
            tar.extractall(dest, members=members)
    roots = list(dest.glob("*/vendor/llama.cpp"))
    if not roots:
        raise SystemExit(f"{sdist.name} has no vendor/llama.cpp")
    return roots[0]


def _generator() -> list[str]:
    return ["-G", "Ninja"] if shutil.which("ninja") else []


def build(version: str = LLAMA_CPP_PYTHON_VERSION, jobs: int = 2) -> Path:
    """Build (or reuse) the cached binary and return its path."""
    target = binary_path(version)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it right now
        if target.exists():
            return target
        for tool in ("cmake", "c++"):
            if not shutil.which(tool):
                raise SystemExit(f"building llama-server needs {tool!r} on PATH "
                                 "(apt-get install cmake build-essential)")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="llama-build-", dir=target.parent) as tmp:
            work = Path(tmp)
            src = _extract_vendor(_download_sdist(version, work), work / "src")
            build_dir = work / "build"
            _run(["cmake", "-S", str(src), "-B", str(build_dir), *_generator(), *CMAKE_FLAGS])
            _run(["cmake", "--build", str(build_dir), "--target", "llama-server",
                  "--parallel", str(jobs)])
            built = build_dir / "bin" / "llama-server"
            staged = target.with_suffix(".tmp")
            shutil.copy2(built, staged)
            os.replace(staged, target)  # atomic: a half-copied binary is never "cached"
        minutes = (time.monotonic() - started) / 60
        (target.parent / "BUILD_INFO").write_text(
            f"llama-cpp-python {version}\nbuild minutes {minutes:.1f}\n"
            f"flags {' '.join(CMAKE_FLAGS)}\n")
        print(f"built llama-server in {minutes:.1f} min", flush=True)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("LLAMA_BUILD_JOBS", "2")))
    parser.add_argument("--print-path", action="store_true", help="print the cached path; never build")
    args = parser.parse_args()
    if args.print_path:
        print(binary_path())
        return
    print(build(jobs=args.jobs))


if __name__ == "__main__":
    main()
