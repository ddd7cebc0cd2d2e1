"""A short headless locust spike from zero against ``tidal sandbox up``, then its report.

Covers (issue 7's required test): locust runs as a subprocess, under the
replicas sampler, with the streaming user and the spike-from-zero shape
through the activator; from its CSVs, no request failed, every request has
its TTFT entry, and the sampled replicas start at zero, rise, and are back
at zero (desired and ready) at the end, having asked for more than one;
the scaler said so (kubectl shows its ``Activated`` Event first, a
``ScaledUp``, ``ScaledToZero`` last, and the status annotation ends at
``desired: 0``); ``loadtests.report`` then writes the merged CSV and the PNG
charts and counts the cold start.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import loadtests
from tests.e2e.loadtests.conftest import SandboxUp

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LOCUSTFILE = Path(loadtests.__file__).parent / "locustfile.py"
LOCUST = Path(sys.executable).parent / "locust"

# Six users against a target concurrency of 2 ask for three replicas; the
# idle after the spike is about twice what the return to zero takes with
# the fixture's 6 s window, 2 s delay and 5 s grace period.
SPIKE = (
    "--shape=spike",
    "--spike-idle-before-s=2",
    "--spike-users=6",
    "--spike-s=12",
    "--spike-idle-after-s=25",
)


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.timeout(180)
def test_spike_from_zero_scales_up_and_back_to_zero(
    sandbox_up: SandboxUp, tmp_path: Path, tool_path: Callable[[str], str]
) -> None:
    out = tmp_path / "out"
    prefix = out / "spike"
    replicas = out / "replicas.csv"
    command = [
        sys.executable,
        "-m",
        "loadtests.replicas_sampler",
        f"--kubeconfig={sandbox_up.kubeconfig}",
        "--deployment=llama",
        f"--out={replicas}",
        "--interval-s=0.5",
        "--",
        str(LOCUST),
        "-f",
        str(LOCUSTFILE),
        "--headless",
        f"--host={sandbox_up.activator_url}",
        *SPIKE,
        "--model=llama-3-8b",
        "--prompt-tokens=128",
        "--output-tokens=32",
        "--request-timeout-s=60",
        f"--csv={prefix}",
        "--csv-full-history",
        "--loglevel=WARNING",
        "OpenAIStreamingUser",
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=150)
    assert run.returncode == 0, f"locust failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"

    # No request failed, and there were some.
    stats = {(r["Type"], r["Name"]): r for r in rows(Path(f"{prefix}_stats.csv"))}
    aggregated = stats[("", "Aggregated")]
    assert int(aggregated["Request Count"]) > 0
    assert int(aggregated["Failure Count"]) == 0, aggregated
    log = rows(Path(f"{prefix}_requests.csv"))
    posts = [r for r in log if r["type"] == "POST"]
    assert posts and all(r["ok"] == "1" for r in log), [r for r in log if r["ok"] != "1"]
    assert sum(1 for r in log if r["type"] == "TTFT") == len(posts)
    # The first requests were held through the cold start: the longest TTFT
    # is at least the 2 s startup delay.
    assert max(float(r["response_time_s"]) for r in log if r["type"] == "TTFT") >= 2.0

    # Replicas: zero, then up, then zero again.
    samples = [r for r in rows(replicas) if not r["error"]]
    assert samples, "the sampler recorded nothing"
    ready = [int(r["ready"]) for r in samples]
    desired = [int(r["desired"]) for r in samples]
    assert desired[0] == 0 and ready[0] == 0, samples[:3]
    assert max(ready) >= 1, "no replica ever became ready"
    assert desired[-1] == 0 and ready[-1] == 0, samples[-5:]
    # Six users at a target concurrency of 2: the spike scaled the model out.
    assert max(desired) >= 2, "the spike never asked for a second replica"

    # What the scaler said about it, as kubectl shows it: an Event per change, the
    # wake first and the return to zero last, and the status annotation to match.
    kubectl = tool_path("kubectl")
    listed = subprocess.run(
        [kubectl, "get", "events", "-o", "json"],
        env=sandbox_up.env(), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    said = [
        e
        for e in json.loads(listed.stdout)["items"]
        if e.get("source", {}).get("component") == "tidal-scaler"
        and e["involvedObject"].get("name") == "llama"
    ]
    said.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
    scale_reasons = [
        e["reason"] for e in said if e["reason"] in {"Activated", "ScaledUp", "ScaledToZero"}
    ]
    assert scale_reasons[0] == "Activated", scale_reasons
    assert "ScaledUp" in scale_reasons and scale_reasons[-1] == "ScaledToZero", scale_reasons
    shown = subprocess.run(
        [kubectl, "get", "deploy", "llama", "-o", "json"],
        env=sandbox_up.env(), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    annotations = json.loads(shown.stdout)["metadata"]["annotations"]
    final = json.loads(annotations["autoscaling.tidal.dev/status"])
    assert (final["desired"], final["reason"]) == (0, "ScaledToZero"), final

    # The report: merged CSV, the PNGs, and figures that agree with the above.
    report = subprocess.run(
        [sys.executable, "-m", "loadtests.report", str(prefix), f"--replicas={replicas}", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout.strip().splitlines()[-1])
    assert summary["failures"] == 0
    assert summary["cold_starts"] >= 1
    assert summary["final_ready"] == 0
    for name in ("report.csv", "report.png", "replicas.png", "ttft.png", "load.png"):
        path = Path(f"{prefix}_{name}")
        assert path.is_file() and path.stat().st_size > 0, f"{path} was not written"
    assert Path(f"{prefix}_report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
