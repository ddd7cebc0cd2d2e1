"""Benchmark-tool clients through ``tidal sandbox up``, from zero, with the example's own knobs.

Covers (what GuideLLM does to an activator, without GuideLLM, which needs
torch: ``make guidellm`` runs the real one):
- ``GET /health`` answers 200 at zero replicas, as GuideLLM's check needs;
- 2 streaming requests a second from zero for 30 s (a 10 s cold start, 4
  per replica: the README's story), each client closing its connection at
  ``data: [DONE]``: every one answered, and the activator's counter equals
  the requests sent, none cut;
- the wake's backlog (20 held through the cold start) starts at most the 2
  replicas the load needs once the first is ready (it asked for 4 before).
"""

from __future__ import annotations

import asyncio
import csv
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.loadtests.conftest import running_sandbox

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# The example model as `tidal sandbox up` makes it by default: a 10 s cold
# start and 4 concurrent requests per replica; zero 10 s after the load.
STORY_KNOBS = ("--window=20s", "--grace-period=10s", "--max-scale=4")
RATE_PER_S = 2
SECONDS = 30
BODY = (
    b'{"model": "llama-3-8b", "stream": true, "max_tokens": 32, "ignore_eos": true, '
    b'"stream_options": {"include_usage": true, "continuous_usage_stats": true}, '
    b'"messages": [{"role": "user", "content": "Tell me about tides."}]}'
)


async def _close_at_done(host: str, port: int) -> bool:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
    )
    got = b""
    while b"data: [DONE]" not in got:
        chunk = await reader.read(65536)
        if not chunk:
            break
        got += chunk
    writer.close()
    return got.startswith(b"HTTP/1.1 200") and b"data: [DONE]" in got


async def _send(url: str) -> list[bool]:
    host, port = url.removeprefix("http://").split(":")
    tasks = []
    for _ in range(SECONDS):
        tasks += [asyncio.create_task(_close_at_done(host, int(port))) for _ in range(RATE_PER_S)]
        await asyncio.sleep(1.0)
    return await asyncio.gather(*tasks)


def _counter(admin_url: str, name: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{admin_url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        line.split("{", 1)[1].split("}", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") and 'target="default/llama"' in line
    }


@pytest.mark.timeout(240)
def test_clients_closing_at_done_from_zero_are_all_counted_and_the_backlog_buys_no_replica(
    tmp_path: Path,
) -> None:
    with running_sandbox(tmp_path, STORY_KNOBS) as up:
        with urllib.request.urlopen(f"{up.activator_url}/health", timeout=10) as resp:
            assert (resp.status, resp.read()) == (200, b"")
        replicas = tmp_path / "replicas.csv"
        sampler = subprocess.Popen(
            [
                *(sys.executable, "-m", "loadtests.replicas_sampler"),
                f"--kubeconfig={up.kubeconfig}",
                "--deployment=llama",
                f"--out={replicas}",
                "--interval-s=0.5",
                "--",
                *(sys.executable, "-c", f"import time; time.sleep({SECONDS + 20})"),
            ]
        )
        try:
            answered = asyncio.run(_send(up.activator_url))
        finally:
            sampler.wait(timeout=SECONDS + 60)
        assert answered.count(True) == RATE_PER_S * SECONDS
        counted = _counter(up.activator_admin_url, "tidal_activator_requests_total")
        assert counted == {'code="2xx",target="default/llama"': RATE_PER_S * SECONDS}, up.text()
        with replicas.open(newline="") as handle:
            desired = [int(row["desired"]) for row in csv.DictReader(handle) if row["desired"]]
        assert "at zero replicas" in up.text()  # the sampler may start after the wake
        assert 1 <= max(desired) <= 2, desired
