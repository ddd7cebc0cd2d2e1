"""``tidal sandbox up``: the sandbox with Tidal running on it, kept up for kubectl, curl and locust.

Starts a :class:`~loadtests.sandbox.stack.SandboxStack` in ``--dir``: the
emulated cluster, ``tidal scaler`` and ``tidal activator`` as real processes,
and the example model (an annotated fake-vLLM Deployment ``llama`` serving
``llama-3-8b``, at zero replicas). It then prints where everything is and
commands to try, copy-pastable as they stand into another terminal:
absolute paths, the kubeconfig inline, and the ``tidal``/``python``/``locust``
of the environment this runs from (bare names when that environment is on
``PATH``, absolute paths otherwise).

It runs until SIGINT (Ctrl-C) or SIGTERM, then stops what it started, in
order (the activator first, so it drains, then the scaler, then the cluster
and its pods), and exits 0. If the scaler or the activator dies on its own,
it says so with the end of its log, stops the rest and exits 1.

Defaults are meant for playing, not for production: a 10 s cold start and
half a minute of idle before zero, so a load test shows the whole cycle in
a couple of minutes. Every knob is a flag (``--help``), and the annotations
can be changed live with ``kubectl annotate``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shlex
import shutil
import signal
import sys
from pathlib import Path

import uvloop

import loadtests
from loadtests.sandbox.cluster.cluster import DirectoryInUse
from loadtests.sandbox.directory import add_dir_flag
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.example_flags import add_model_flags, model_from_args
from loadtests.sandbox.stack import SandboxStack, StackSettings
from loadtests.sandbox.stack_addresses import StackAddresses

__all__ = ["SANDBOX_MODEL", "configure", "run", "try_commands"]

SANDBOX_MODEL = ExampleModel(
    startup_delay_s=10.0,
    window_s=20.0,
    scale_down_delay_s=10.0,
    grace_s=30.0,
    target_concurrency=4,
    max_scale=4,
)


def configure(parser: argparse.ArgumentParser) -> None:
    add_dir_flag(parser, "directory for the kubeconfig, certificates and logs (created)")
    parser.add_argument(
        "--no-example",
        action="store_true",
        help="start without the example Deployment (apply your own with kubectl)",
    )
    add_model_flags(parser, SANDBOX_MODEL)


def _tool(name: str) -> str:
    """How to call ``name`` from this environment, from any folder of another terminal.

    The bare name when the shell would find this environment's own (the
    virtualenv is activated), else its absolute path: a relative path would
    work only from the folder this command was started in.
    """
    bin_dir = Path(sys.executable).parent
    path = bin_dir / name
    if name == "python":
        path = Path(sys.executable)
    if not path.exists():
        return name
    found = shutil.which(name)
    if found is not None and Path(found).absolute() == path.absolute():
        return name
    return str(path.absolute())


def try_commands(where: StackAddresses, model: ExampleModel | None) -> list[tuple[str, str]]:
    """(what it shows, the command) for each thing to try, with real paths and URLs."""
    kube = f"KUBECONFIG={shlex.quote(str(where.kubeconfig))}"
    commands = [
        # One type per watch: kubectl refuses "get deploy,pods -w".
        ("watch the model's pods come and go", f"{kube} kubectl get pods -w"),
        ("watch the Deployment's replicas", f"{kube} kubectl get deploy -w"),
        (
            "what Tidal is doing (live signals from the scaler)",
            f"{kube} {_tool('tidal')} status --scaler-url {where.scaler_url}",
        ),
        ("the activator's own metrics", f"curl -s {where.activator_admin_url}/metrics"),
    ]
    if model is None:
        return commands
    body = json.dumps(
        {
            "model": model.model,
            "stream": True,
            "max_tokens": 32,
            "messages": [{"role": "user", "content": "Tell me about tides."}],
        }
    )
    to_zero_s = model.window_s + model.scale_down_delay_s + model.grace_s + 15.0
    locustfile = Path(loadtests.__file__).parent / "locustfile.py"
    commands += [
        (
            f"a streaming request through the activator (held {model.startup_delay_s:g}s "
            "while the model wakes)",
            f"curl -N {where.activator_url}/v1/chat/completions "
            f"-H 'Content-Type: application/json' -d {shlex.quote(body)}",
        ),
        (
            "change a knob live (the scaler picks it up from the watch)",
            f"{kube} kubectl annotate deploy {model.name} "
            "autoscaling.tidal.dev/max-scale=2 --overwrite",
        ),
        (
            "a locust spike from zero, with replicas sampled from the API",
            f"{_tool('python')} -m loadtests.replicas_sampler --kubeconfig "
            f"{shlex.quote(str(where.kubeconfig))} --namespace {model.namespace} "
            f"--deployment {model.name} --out out/replicas.csv -- "
            f"{_tool('locust')} -f {shlex.quote(str(locustfile))} --headless "
            f"--host {where.activator_url} --shape spike --spike-idle-before-s 5 "
            f"--spike-users 16 --spike-s 30 --spike-idle-after-s {to_zero_s:.0f} "
            f"--model {model.model} --prompt-tokens 256 --output-tokens 64 "
            "--csv out/spike --csv-full-history OpenAIStreamingUser",
        ),
        (
            "then its report (CSV and PNG charts)",
            f"{_tool('python')} -m loadtests.report out/spike --replicas out/replicas.csv",
        ),
    ]
    return commands


def _describe(where: StackAddresses, model: ExampleModel | None) -> str:
    rows = [
        ("kubeconfig", str(where.kubeconfig)),
        ("activator", where.activator_url),
        ("activator admin", f"{where.activator_admin_url}  (/metrics, /readyz)"),
        ("scaler", f"{where.scaler_url}  (GET /v1/targets)"),
        ("logs", str(where.directory / "logs")),
    ]
    if model is not None:
        rows.insert(
            4,
            (
                "model",
                f"Deployment {model.target} serving {model.model!r}, at zero replicas; "
                f"cold start {model.startup_delay_s:g}s, "
                f"{model.target_concurrency} concurrent requests per replica, "
                f"at most {model.max_scale} replicas, to zero after {model.grace_s:g}s idle",
            ),
        )
    lines = [f"Tidal sandbox is up in {where.directory}"]
    lines += [f"  {name + ':':<17}{value}" for name, value in rows]
    if model is None:
        lines += [
            "",
            "No example model: apply your own Deployment and Service with kubectl. Each pod",
            "runs a fake vLLM serving its --served-model-name (else the names in its",
            "Deployment's routing.tidal.dev/models); docs/sandbox.md has recipes and the",
            "sandbox.tidal.dev/* pod annotations that shape it.",
        ]
    lines += ["", "Try (in another terminal):"]
    for what, command in try_commands(where, model):
        lines += [f"  # {what}", f"  {command}"]
    lines += ["", "Ctrl-C stops the activator, the scaler, the cluster and every pod."]
    return "\n".join(lines)


async def _serve(args: argparse.Namespace) -> int:
    model: ExampleModel | None = None
    try:
        if not args.no_example:
            model = model_from_args(args, SANDBOX_MODEL)
    except ValueError as exc:
        print(f"tidal sandbox up: {exc}", file=sys.stderr)
        return 2
    directory: Path = args.dir.resolve()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stack = SandboxStack(directory, StackSettings(example=model))
    print(f"Starting the sandbox in {directory} ...", flush=True)
    status = 0
    try:
        starting = asyncio.create_task(stack.start())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():  # interrupted while starting; start() cleans up after itself
            starting.cancel()
        stopping.cancel()
        try:
            await starting
        except asyncio.CancelledError:
            print("interrupted while starting", flush=True)
            return 0
        print(_describe(stack.addresses, model), flush=True)
        while not stop.is_set():
            for process in (stack.scaler, stack.activator):
                if process is not None and not process.running:
                    print(
                        f"tidal {process.name} exited on its own; its log ({process.log}) "
                        f"ends with:\n{process.tail()}",
                        file=sys.stderr,
                        flush=True,
                    )
                    status = 1
                    stop.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)
        print("Stopping: the activator (draining), the scaler, the cluster ...", flush=True)
    except DirectoryInUse as exc:
        print(f"tidal sandbox up: {exc}", file=sys.stderr, flush=True)
        return 1
    except (OSError, RuntimeError, TimeoutError) as exc:
        print(f"tidal sandbox up: {exc}", file=sys.stderr, flush=True)
        print(f"logs are in {directory / 'logs'}", file=sys.stderr, flush=True)
        status = 1
    finally:
        await stack.stop()
    print("Stopped.", flush=True)
    return status


def run(args: argparse.Namespace) -> int:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(_serve(args))
