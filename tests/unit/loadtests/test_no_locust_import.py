"""The pure load-test modules never import locust.

Covers: importing traces, schedules, streaming, payloads, report and the
replicas sampler leaves locust (and with it gevent's monkey-patching) out of
the process. Checked in a fresh interpreter, since this one may have
imported them already.
"""

from __future__ import annotations

import subprocess
import sys

PURE = ["traces", "schedules", "streaming", "payloads", "report", "replicas_sampler"]


def test_pure_modules_do_not_import_locust() -> None:
    code = (
        "import sys\n"
        + "".join(f"import loadtests.{name}\n" for name in PURE)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('locust', 'gevent'))\n"
        + "print(bad)\nsys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
