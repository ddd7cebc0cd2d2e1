"""Short headless locust runs (subprocesses) against loopback fakes, then the report.

Covers:
- a spike from zero with the streaming chat user against a fake that holds
  requests through a cold start, scales out and returns to zero: TTFT and
  TPOT entries exist beside every request, none failed, held requests show
  the cold start in their TTFT, the sampler (reading the fake Kubernetes
  API) saw replicas go 0 -> up -> 0, and the report writes its CSV and PNGs;
- the streaming, non-streaming and Triton users together under the default
  shape (-u/-r/-t), on /v1/completions: each has its entry, none failed, and
  the server saw exact-length requests;
- open-loop replay of a small trace: every request sent, at the times the
  trace says (compressed), measured from those times; the same for a window
  of the real code trace (shipped with the package) and for the seeded
  diurnal arrivals;
- an open-loop shape given a closed-loop user class stops before the test
  with exit status 2 and one line naming OpenLoopUser, not a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
from pathlib import Path

import pytest

from groundwork.kube.connection import connect
from loadtests import report, traces
from loadtests.replicas_sampler import KubeDeploymentReader, sample
from loadtests.schedules import diurnal_arrivals

from .conftest import ServeApp, run_locust
from .fakes import COUNTS, FakeReplicas, kube_app, openai_app, write_kubeconfig

pytestmark = pytest.mark.slow


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def stats_entries(prefix: Path) -> dict[tuple[str, str], dict[str, str]]:
    return {(row["Type"], row["Name"]): row for row in read_rows(Path(f"{prefix}_stats.csv"))}


def request_log(prefix: Path) -> list[dict[str, str]]:
    return read_rows(Path(f"{prefix}_requests.csv"))


async def test_spike_from_zero_then_the_report(serve: ServeApp, tmp_path: Path) -> None:
    replicas = FakeReplicas(cold_start_s=1.5, idle_to_zero_s=2.0)
    model_app = openai_app(replicas=replicas, token_delay_s=0.005)
    model_url = await serve(model_app)
    kube_url = await serve(kube_app(token="t0ken", replicas=replicas.counts))
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube_url, "t0ken")
    access = await connect(kubeconfig=str(kubeconfig))
    prefix = tmp_path / "spike"
    replicas_csv = tmp_path / "replicas.csv"
    stop = asyncio.Event()
    try:
        reader = KubeDeploymentReader(access.api, namespace="default", name="llama")
        with replicas_csv.open("w", newline="") as out:
            sampler = asyncio.create_task(sample(reader, out, interval_s=0.25, stop=stop))
            try:
                run = await run_locust(
                    model_url,
                    ["--shape", "spike", "--spike-idle-before-s", "2", "--spike-users", "4",
                     "--spike-s", "4", "--spike-idle-after-s", "4", "--prompt-tokens", "20",
                     "--output-tokens", "16", "OpenAIStreamingUser"],
                    csv_prefix=prefix,
                )  # fmt: skip
            finally:
                stop.set()
                with contextlib.suppress(asyncio.CancelledError):
                    await sampler
    finally:
        await access.close()
    assert run.returncode == 0, run.output[-3000:]

    name = "/v1/chat/completions stream"
    entries = stats_entries(prefix)
    requests = int(entries[("POST", name)]["Request Count"])
    assert requests >= 4
    assert entries[("POST", name)]["Failure Count"] == "0"
    assert int(entries[("TTFT", name)]["Request Count"]) == requests
    assert int(entries[("TPOT", name)]["Request Count"]) == requests
    # The aggregated row counts requests, not the TTFT/TPOT figures beside them.
    aggregated = entries[("", "Aggregated")]
    assert int(aggregated["Request Count"]) == requests
    assert aggregated["Max Response Time"] == entries[("POST", name)]["Max Response Time"]
    assert model_app[COUNTS].bad == 0
    assert model_app[COUNTS].streamed == requests
    log = request_log(prefix)
    assert {row["ok"] for row in log} == {"1"}
    ttfts = sorted(float(r["response_time_s"]) for r in log if r["type"] == "TTFT")
    # The first four were held through the 1.5 s cold start; later ones were warm.
    assert ttfts[-1] >= 1.4
    assert ttfts[0] < 0.5

    ready = [r.ready for r in report.read_replicas(replicas_csv) if r.ready is not None]
    assert ready[0] == 0
    assert max(ready) >= 1
    assert ready[-1] == 0

    summary, written = report.write_report(prefix, replicas=replicas_csv, title="spike")
    assert summary.failures == 0
    assert summary.requests == requests
    assert summary.cold_starts >= 1
    assert summary.final_ready == 0
    assert {p.name for p in written} >= {"spike_report.csv", "spike_report.png", "spike_ttft.png"}
    rows = read_rows(Path(f"{prefix}_report.csv"))
    assert any(row["ttft_p99_s"] and float(row["ttft_p99_s"]) >= 1.4 for row in rows)


async def test_all_user_classes_under_the_default_shape(serve: ServeApp, tmp_path: Path) -> None:
    app = openai_app()
    url = await serve(app)
    prefix = tmp_path / "mix"
    run = await run_locust(
        url,
        ["-u", "3", "-r", "3", "-t", "4s", "--endpoint", "completions", "--prompt-tokens", "8",
         "--output-tokens", "5", "OpenAIStreamingUser", "OpenAINonStreamingUser", "TritonUser"],
        csv_prefix=prefix,
    )  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    entries = stats_entries(prefix)
    for key in [("POST", "/v1/completions stream"), ("TTFT", "/v1/completions stream"),
                ("POST", "/v1/completions"), ("POST", "/v2/models/llama-3-8b/infer")]:  # fmt: skip
        assert key in entries, sorted(entries)
        assert int(entries[key]["Request Count"]) > 0
        assert entries[key]["Failure Count"] == "0"
    counts = app[COUNTS]
    assert counts.bad == 0
    assert min(counts.streamed, counts.whole, counts.triton) > 0
    assert all(b["max_tokens"] == 5 and b["ignore_eos"] is True for b in counts.bodies)


def small_trace(path: Path) -> list[traces.TraceRequest]:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(30):
        # Bursty: ten at once, a gap, then a trickle.
        second = 0.0 if i < 10 else 1.0 + i * 0.1
        lines.append(f"2023-11-16 10:00:{second:010.7f},{50 + i},{3 + i % 4}")
    path.write_text("\n".join(lines) + "\n")
    return traces.read_trace(path)


def real_code_window() -> tuple[str, list[traces.TraceRequest]]:
    path = traces.find_trace("code")
    return str(path), traces.prepare(traces.read_trace(path), start_s=0, duration_s=40)


@pytest.mark.parametrize("source", ["small", "real-code-window", "diurnal"])
async def test_open_loop_replay_sends_every_request_on_schedule(
    serve: ServeApp, tmp_path: Path, source: str
) -> None:
    if source == "small":
        trace_path = tmp_path / "small.csv"
        records = small_trace(trace_path)
        window = ["--trace", str(trace_path)]
        compression = 2.0
    elif source == "diurnal":
        # Seeded, so the shape in locust draws these very arrivals.
        records = diurnal_arrivals(
            peak_rps=15, peak_to_trough=10, day_s=4, prompt_tokens=8, output_tokens=5, seed=3
        )
        window = [
            "--shape",
            "diurnal",
            "--diurnal-peak-rps",
            "15",
            "--diurnal-day-s",
            "4",
            "--diurnal-seed",
            "3",
            "--prompt-tokens",
            "8",
            "--output-tokens",
            "5",
        ]
        compression = 1.0
    else:
        trace_name, records = real_code_window()
        window = ["--trace", trace_name, "--trace-duration-s", "40"]
        compression = 8.0
    app = openai_app(token_delay_s=0.001)
    url = await serve(app)
    prefix = tmp_path / "replay"
    run = await run_locust(
        url,
        ["--shape", "replay", *window, "--trace-compression", str(compression),
         "--open-loop-lead-in-s", "1"],  # a later --shape wins
        csv_prefix=prefix,
    )  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    entries = stats_entries(prefix)
    name = "/v1/chat/completions stream"
    assert int(entries[("POST", name)]["Request Count"]) == len(records)
    assert entries[("POST", name)]["Failure Count"] == "0"
    assert app[COUNTS].streamed == len(records)
    # Origins are the scheduled send times: spaced exactly as the trace, compressed.
    origins = sorted(float(r["origin_unix_s"]) for r in request_log(prefix) if r["type"] == "POST")
    expected = [r.offset_s / compression for r in records]
    assert [round(o - origins[0], 3) for o in origins] == pytest.approx(
        [e - expected[0] for e in expected], abs=2e-3
    )
    # And the prompt and output lengths came from the trace.
    asked = sorted(b["max_tokens"] for b in app[COUNTS].bodies)
    assert asked == sorted(max(r.output_tokens, 1) for r in records)


async def test_an_open_loop_shape_with_the_wrong_user_class(tmp_path: Path) -> None:
    run = await run_locust(
        "http://127.0.0.1:9",
        ["--shape", "diurnal", "--model", "m", "OpenAIStreamingUser"],
        csv_prefix=tmp_path / "wrong",
        timeout_s=60,
    )
    assert run.returncode == 2, run.output[-2000:]
    assert "runs the user class OpenLoopUser; name it on the command line instead of " in (
        run.output
    )
    assert "Traceback" not in run.output
