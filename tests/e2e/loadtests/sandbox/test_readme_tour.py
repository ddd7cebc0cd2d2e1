"""The README's sandbox tour, its shell blocks run as written against ``tidal sandbox up``.

Covers: every ``sh`` block of "2. Play with it" runs with bash (``set -e``)
against a running sandbox, with the example addresses and directory the
README shows replaced by the ones this sandbox printed (the README says to
use those): the kubectl reads and annotations, the request through the
activator held through the cold start, the OpenAI client, ``tidal status``
and the scaler's and activator's endpoints, the spot annotation and
``spot-capacity``, ``kubectl logs`` of the model's pod.

Then, with the model held at two replicas (``min-scale``: one on demand,
one on spot), the README's lines that preempt the node a spot replica runs
on, with a 1 s notice for the 10 s shown: the node they pick holds a spot
pod, and that pod is the one deleted.

Left out, each for its reason: the install lines and ``tidal sandbox up``
itself (the fixture runs it), ``pip install`` (no network here), watches
(``-w`` never ends), and the two-minute locust load tests
(tests/integration/loadtests/test_locust_runs.py runs shorter ones).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.loadtests.conftest import SandboxUp

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[4]
_SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
_LEFT_OUT = re.compile(
    r"pip install|^\. \.venv|tidal sandbox up|\s-w\b|preempt|^node=|locust|replicas_sampler|"
    r"loadtests\.report|^mkdir -p out"
)


def tour_script() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("### 2. Play with it", 1)[1].split("### 3.", 1)[0]
    kept: list[str] = []
    for block in _SH_BLOCK.findall(section):
        # One command per entry: continuation lines joined, a heredoc kept whole.
        commands: list[str] = []
        lines = block.splitlines()
        while lines:
            line = lines.pop(0)
            while line.endswith("\\") and lines:
                line = line[:-1] + " " + lines.pop(0).strip()
            heredoc = re.search(r"<<'(\w+)'", line)
            if heredoc:
                body = []
                while lines:
                    body.append(lines.pop(0))
                    if body[-1] == heredoc.group(1):
                        break
                line = "\n".join([line, *body])
            commands.append(line)
        kept += [c for c in commands if not _LEFT_OUT.search(c)]
    return "\n".join(kept)


def test_the_tour_runs_as_written(sandbox_up: SandboxUp) -> None:
    script = tour_script()
    for expected in ("kubectl logs deploy/llama", "spot-capacity unlimited", "OpenAI("):
        assert expected in script
    directory = sandbox_up.kubeconfig.parent
    shown = {
        "/tmp/tidal-sandbox": str(directory),
        "http://127.1.0.3:8080": sandbox_up.activator_url,
        "http://127.1.0.3:9091": sandbox_up.activator_admin_url,
        "http://127.1.0.2:8090": sandbox_up.scaler_url,
    }
    examples = set(re.findall(r"http://127\.1\.0\.\d+:\d+", script))
    assert examples <= set(shown), f"example addresses the test does not replace: {examples}"
    for example, real in shown.items():
        script = script.replace(example, real)
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, f"{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}"
    assert "data: [DONE]" in ran.stdout  # the streamed answer through the activator
    assert "['llama-3-8b']" in ran.stdout  # the OpenAI client's model list

    # The spot preemption lines, once a spot replica serves.
    kubectl = ["kubectl", "--kubeconfig", str(sandbox_up.kubeconfig)]
    subprocess.run(
        [
            *kubectl,
            "annotate",
            "deploy",
            "llama",
            "autoscaling.tidal.dev/min-scale=2",
            "--overwrite",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    deadline = time.monotonic() + 60
    while True:
        listed = subprocess.run(
            [*kubectl, "get", "pods", "-l", "placement.tidal.dev/capacity-type=spot", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        spot = [
            p for p in json.loads(listed.stdout)["items"] if p["status"].get("phase") == "Running"
        ]
        if spot:
            break
        assert time.monotonic() < deadline, "no spot replica ran with min-scale=2"
        time.sleep(0.5)
    text = (ROOT / "README.md").read_text()
    lines = [
        line for line in text.splitlines() if line.startswith(("node=", "tidal sandbox preempt"))
    ]
    assert len(lines) == 2, lines
    preempt = "\n".join(lines).replace("/tmp/tidal-sandbox", str(directory))
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", preempt.replace("--notice 10s", "--notice 1s")],
        env={**env, "KUBECONFIG": str(sandbox_up.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    deleted = json.loads(ran.stdout.splitlines()[0])["pods_deleted"]
    assert deleted and all("llama-spot-" in pod for pod in deleted), deleted
