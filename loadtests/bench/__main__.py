"""``make bench``: run every benchmark module, each in its own process.

A benchmark is a module ``loadtests/bench/bench_<name>.py`` with a
``main(argv: list[str]) -> int``. Each runs in a fresh interpreter so that one
benchmark's sockets, threads or event-loop policy cannot skew the next, and
each prints its own figures as ratios against a reference it measured in the
same run. ``python -m loadtests.bench NAME …`` runs only the named ones.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import time
from pathlib import Path


def discover() -> list[str]:
    here = Path(__file__).parent
    return sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules([str(here)])
        if m.name.startswith("bench_")
    )


def main(argv: list[str]) -> int:
    available = discover()
    wanted = argv or available
    unknown = [w for w in wanted if w not in available]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available}", file=sys.stderr)
        return 2
    failed: list[str] = []
    for name in wanted:
        print(f"\n=== bench {name} ===", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, "-m", f"loadtests.bench.bench_{name}"])
        print(f"=== {name}: exit {code} in {time.monotonic() - started:.1f}s ===", flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        print(f"\nbenchmarks that failed: {failed}", file=sys.stderr)
        return 1
    if not wanted:
        print("no benchmarks yet")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
