"""``tidal status`` rows from the API alone.

Covers: a Deployment with a bad annotation shows reason InvalidAnnotation and
the parser's message (the scaler leaves it alone, so its status annotation
would otherwise look current), in the table and in JSON rows; a valid one
keeps the reason from its status annotation. A spot pair: READY counts both
halves, a line under the table names them (a companion not created yet
too), and live cost columns and the saving show. A model with GPU shapes:
READY counts its shape companions, and a line under the table gives the
replicas per shape, their hourly cost, each Deployment's Ready replicas and,
live, the shapes capped; its shape keys are not unknown. Under the table: routing
annotations the activator cannot use, unknown keys of ours, a warm tier without sleep mode, and
Deployments whose opt-in label is not "true". A model with a TTFT objective:
its goal from the annotations, and live the learned capacity and the
attainment measured, in a line under the table and in JSON rows. Output cut
short by its reader ends without a traceback. The default table fits 100
columns and offers ``-o wide``, which has every column, says what its ``-``
means and offers nothing it already shows; ``--help`` explains MODE and the
reasons.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from scaler.kube.types import CompanionInfo
from scaler.policy.api import SloReport
from scaler.status import (
    HELP_LEGEND,
    configure,
    devices_line,
    not_opted_in_lines,
    render_table,
    rows,
)
from tests.unit.scaler.fakes import deployment


def test_invalid_annotation_is_shown() -> None:
    bad = deployment("bad", annotations={"autoscaling.tidal.dev/window": "1s"})
    good = deployment(
        "good",
        annotations={"autoscaling.tidal.dev/status": json.dumps({"reason": "Steady"})},
    )
    table = rows([bad, good])
    assert table[0]["reason"] == "InvalidAnnotation"
    assert "autoscaling.tidal.dev/window" in table[0]["problem"]
    assert "1s" in table[0]["problem"]
    assert table[1]["reason"] == "Steady"
    assert "problem" not in table[1]
    text = render_table(table)
    assert "Left alone until fixed:" in text
    assert "default/bad: " in text


def test_warm_tier_columns_show_sleeping_replicas_and_wakes() -> None:
    warm = deployment("warm")
    cold = deployment("cold")
    live = {
        "default/warm": {
            "desired": 1,
            "signals": {},
            "warm": {
                "pods": {"default/warm-1": {"phase": "sleeping", "level": 1, "since": 3.0}},
                "sleeps": 2,
                "wakes": 1,
                "failedWakes": 0,
                "lastWakeSeconds": 0.96,
            },
        },
        "default/cold": {"desired": 0, "signals": {}},
    }
    table = rows([warm, cold], live)
    assert table[0]["live"]["warm"] == {
        "asleep": 1, "wakes": 1, "sleeps": 2, "failed_wakes": 0, "last_wake_s": 0.96,
        "sleep_mode_unavailable": None,
    }  # fmt: skip
    assert "warm" not in table[1]["live"]
    header, first, second = render_table(table, wide=True).splitlines()[:3]
    assert header.split()[-3:] == ["ASLEEP", "WAKES", "LAST-WAKE"]
    assert first.split()[-3:] == ["1", "1", "0.96s"]
    assert second.split()[-3:] == ["-", "-", "-"]


def test_an_objective_is_shown_with_the_capacity_learned_and_the_attainment_measured() -> None:
    notes = {"autoscaling.tidal.dev/slo-ttft": "2s", "autoscaling.tidal.dev/slo-attainment": "99.5"}
    llama, fresh = (deployment(n, annotations=notes) for n in ("llama", "fresh"))
    plain = deployment("plain")
    measured = SloReport(
        slo_ttft_s=2.0,
        attainment=0.995,
        capacity_tokens_per_s=24_512.3,
        capacity_learned=True,
        sized_replicas=3,
        late_share=0.001,
        requests_per_s=4.0,
        measured_attainment=0.9731,
        measured_first_tokens=2412,
        decode_tokens_per_s=13_102.0,
        decode_slots=256,
        binding="decode",
        hopeless_share=0.012,
        headroom=1.2,
        reachable=False,
        next_replica=0.0031,
    )
    unmeasured = SloReport(2.0, 0.995, 12_000.0, False, 1, 0.0, 0.0)
    live = {
        "default/llama": {"desired": 3, "signals": {}, "slo": measured.as_json()},
        "default/fresh": {"desired": 1, "signals": {}, "slo": unmeasured.as_json()},
        "default/plain": {"desired": 1, "signals": {}},
    }
    table = rows([llama, fresh, plain], live)
    assert table[0]["slo"] == {"ttft_s": 2.0, "attainment": 0.995}
    assert table[0]["live"]["slo"]["measured_attainment"] == 0.9731
    assert "slo" not in table[2]
    text = render_table(table)
    assert "Time-to-first-token objectives (SLO-first scaling):" in text
    assert (
        "default/llama: goal 99.5 % within 2s; capacity 24,512 prompt tokens/s and 13,102 "
        "generated tokens/s (256 sequences) per replica (learned); decode binds; 1.2 % of "
        "requests have prompts no replica prefills in 2s; goal out of reach: sized where one "
        "more replica would meet 0.31 % more, less than it costs; headroom x1.20 (measured "
        "under the "
        "goal the sizing promised); measured 97.31 % within 2s over the last 10m (2,412 first "
        "tokens, servers' TTFT histograms)"
    ) in text
    assert (
        "default/fresh: goal 99.5 % within 2s; capacity 12,000 prompt tokens/s and 0 "
        "generated tokens/s (0 sequences) per replica (prior, not yet learned); prefill binds; "
        "one more replica would meet 0 % more; measured: no first token counted in the last 10m"
    ) in text
    assert "default/plain" not in text.split("objectives")[1]
    # Without --scaler-url: the goal alone.
    assert "default/llama: goal 99.5 % within 2s\n" in render_table(rows([llama, plain])) + "\n"


def test_spot_pair_and_cost() -> None:
    spot = deployment(
        "llama",
        replicas=1,
        annotations={
            "placement.tidal.dev/policy": "spot-with-on-demand-baseline",
            "autoscaling.tidal.dev/status": json.dumps(
                {"desired": 4, "onDemand": 1, "spot": 3, "reason": "ScaledUp"}
            ),
        },
    )
    waiting = deployment("fresh", annotations={"placement.tidal.dev/policy": "spot"})
    companions = {"default/llama": CompanionInfo("default", "llama-spot", "llama", 3, 3, "h")}
    cost = {
        "dollars_per_hour": 7.79,
        "saving_dollars_per_hour": 8.61,
        "saved_dollars": 1.5,
    }
    live = {"default/llama": {"desired": 4, "cost": cost}}
    table = rows([spot, waiting], live, companions)
    assert table[0]["ready"] == 4  # the pair's: 1 on demand + 3 spot
    assert table[0]["pair"]["spot"] == {"deployment": "llama-spot", "exists": True, "ready": 3}
    assert table[0]["live"]["cost"] == cost
    text = render_table(table, wide=True)
    assert "$/H" in text.splitlines()[0] and "SAVED-$/H" in text.splitlines()[0]
    assert (
        "default/llama: spot-with-on-demand-baseline: on-demand llama 1 ready, "
        "spot llama-spot 3 ready; $7.79/h, saving $8.61/h against all on-demand for the "
        "replicas wanted ($1.50 saved so far)"
    ) in text
    assert "default/fresh: spot: on-demand fresh 0 ready, spot fresh-spot (not created yet)" in text


def test_replicas_per_shape_and_the_hourly_cost() -> None:
    status = {"desired": 3, "shapes": {"h100": 1, "mig-3g.40gb": 2}, "costPerHour": 22.83}
    d = deployment(
        "llama",
        annotations={
            "autoscaling.tidal.dev/status": json.dumps(status),
            "placement.tidal.dev/shapes": "h100,mig-3g.40gb",
            "placement.tidal.dev/shape-args.mig-3g.40gb": "--max-model-len 32768",
        },
        ready=1,
    )
    companion = CompanionInfo("default", "llama-mig-3g.40gb", "llama", 2, 2, "h")
    live = {
        "default/llama": {
            "signals": {},
            "shapes": {"capped": {"l4": {"at_most": 0, "why": "Pending"}}},
        }
    }
    table = rows([d], live, shape_companions={"default/llama": {"mig-3g.40gb": companion}})
    assert table[0]["ready"] == 3 and "unknown_keys" not in table[0]
    text = render_table(table)
    assert "GPU shapes (replicas asked of each, their on-demand cost):" in text
    assert (
        "default/llama: 1 x h100 + 2 x mig-3g.40gb, $22.83/h; ready: llama 1,"
        " llama-mig-3g.40gb 2; l4 capped at 0 (Pending past the pending-timeout)"
    ) in text


def test_what_tidal_does_not_act_on_is_said_under_the_table() -> None:
    typo = deployment(
        "typo",
        annotations={"routing.tidal.dev/model": "llama", "autoscaling.tidal.dev/max-scal": "3"},
    )
    nosleep = deployment("nosleep")
    live = {
        "default/typo": {"desired": 1, "signals": {}},
        "default/nosleep": {
            "desired": 1,
            "signals": {},
            "warm": {"pods": {}, "sleepModeUnavailable": "default/nosleep-1 has no sleep mode"},
        },
    }
    table = rows([typo, nosleep], live)
    assert 'routing.tidal.dev/model: "llama"' in table[0]["routing_problem"]
    text = render_table(table)
    assert "Routing annotations the activator cannot use (it uses the defaults):" in text
    assert 'default/typo: routing.tidal.dev/model: "llama"' in text
    assert "Annotation keys Tidal does not know (ignored; scaling goes on):" in text
    assert "(did you mean autoscaling.tidal.dev/max-scale?)" in text
    assert table[0]["reason"] != "InvalidAnnotation"  # an unknown key alone refuses nothing
    assert "Sleep mode unavailable (replicas stay awake):" in text
    assert "default/nosleep: default/nosleep-1 has no sleep mode" in text
    lines = not_opted_in_lines([("default/yes", "yes")])
    assert 'default/yes: autoscaling.tidal.dev/enabled="yes"' in lines
    assert any('must be "true"' in line for line in lines)
    assert not_opted_in_lines([]) == []


def test_a_reader_that_stops_reading_ends_it_quietly() -> None:
    # A real pipe whose reader goes away after one line, as with ``tidal status | head -1``.
    program = "from scaler.status import write_out; write_out(chr(10).join(['row'] * 200000))"
    proc = subprocess.run(
        f'{sys.executable} -c "{program}" | head -1',
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.stdout == "row\n"
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_the_default_table_fits_100_columns_and_wide_has_every_column() -> None:
    spot = {"placement.tidal.dev/policy": "spot-with-on-demand-baseline"}
    models = [deployment("llama-3-8b-instruct", annotations=spot), deployment("mistral-7b")]
    view = {
        "desired": 12,
        "mode": "panic",
        "reason": "ScaledToZero",
        "signals": {k: {"stable": 123.45} for k in ("concurrency", "queue_depth")},
        "cost": {
            "dollars_per_hour": 123.45,
            "saving_dollars_per_hour": 67.89,
            "saved_dollars": 1.0,
        },
        "warm": {"pods": {"p": {"phase": "sleeping"}}, "wakes": 10, "lastWakeSeconds": 1.25},
    }
    live = {"default/llama-3-8b-instruct": view, "default/mistral-7b": view}
    table = rows(models, live)
    narrow = render_table(table).split("\n\n")[0].splitlines()
    assert max(len(line) for line in narrow) <= 100, narrow
    assert narrow[0].split() == [
        "NAMESPACE", "NAME", "DESIRED", "READY", "MODE", "REASON", "LIVE-REASON", "CONCURRENCY",
        "ASLEEP",
    ]  # fmt: skip
    assert narrow[1].split()[2] == "12" and narrow[1].split()[4] == "panic"  # the scaler's now
    assert "-o wide shows every column" in render_table(table)
    wide_text = render_table(table, wide=True)
    wide = wide_text.splitlines()[0].split()
    for column in ("ON-DEMAND", "SPOT", "QUEUE", "KV-CACHE", "GPU", "$/H", "SAVED-$/H", "WAKES"):
        assert column in wide
    # The wide view says what its "-" means, and offers no view already shown.
    assert "-o wide" not in wide_text
    assert "'-' there: the model does not scale on it" in " ".join(wide_text.split())
    assert "target-queue-depth" in wide_text and "--prometheus-url" in wide_text
    parser = argparse.ArgumentParser()
    configure(parser)
    assert HELP_LEGEND in parser.format_help()
    for word in ("panic", "Steady", "Holding", "NoData", "-o wide"):
        assert word in HELP_LEGEND


def test_held_requests_by_class_are_shown_where_classes_are_in_use() -> None:
    observed = {"activator_held_critical": 2.0, "activator_held_standard": 7.0}
    live = {
        "default/ranked": {
            "desired": 1,
            "signals": {},
            "observed": {**observed, "activator_shed": 3},
        },
        "default/plain": {"desired": 1, "signals": {}, "observed": {"activator_held_standard": 9}},
    }
    text = render_table(rows([deployment("ranked"), deployment("plain")], live))
    assert "Held by priority class (all activators, live):" in text
    assert (
        "default/ranked: held critical 2, standard 7, sheddable 0; shed 3 in the last report"
        in text
    )
    assert "default/plain:" not in text  # everything standard, nothing shed: as before


def test_the_gpus_held_are_said_whole_by_use_under_the_table() -> None:
    devices = {
        "held": 3, "serving": 2, "starting": 0, "sleeping_only": 1,
        "gpu_seconds": {"serving": 7200.0, "starting": 360.0, "sleeping_only": 1800.0},
    }  # fmt: skip
    lines = devices_line(devices)
    assert lines[1].startswith("GPU devices (each GPU or MIG instance whole")
    assert lines[2].startswith("3 held: 2 serving, 0 starting, 1 sleeping-only")
    assert lines[2].endswith("2.00 serving, 0.10 starting, 0.50 sleeping-only")
    assert devices_line(None) == []
