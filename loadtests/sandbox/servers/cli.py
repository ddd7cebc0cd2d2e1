"""``tidal sandbox model-server``: run one fake vLLM- or Triton-like server.

Flags map one to one onto :class:`ServerConfig`; durations are Go-style
(``90s``, ``5m``, ``250ms``, ``1m30s``) or plain seconds, read by the
sandbox's one duration parser (``loadtests.sandbox.cluster.quantity``).
Performance knobs default to Llama-3.1-8B on one H100 under vLLM
(``simulator.engine.params``); with ``--gpu-shape`` they are scaled to that
GPU or MIG device (:mod:`~loadtests.sandbox.servers.gpu_device`).
This module is also the entry point of the launcher's forked children
(:func:`main`), so it imports only what a server needs.

Settings here are plain flags, not pydantic-settings: a fake server is a test
fixture, and keeping pydantic out keeps each server process small.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from collections.abc import Sequence

from loadtests.sandbox.cluster.quantity import parse_duration
from loadtests.sandbox.servers import gpu_device
from loadtests.sandbox.servers.faults import Faults
from loadtests.sandbox.servers.kv_events import parse_kv_events_config
from loadtests.sandbox.servers.lora import LoraParams, parse_lora_module
from loadtests.sandbox.servers.prompt_blocks import DEFAULT_BLOCK_SIZE
from loadtests.sandbox.servers.server import ServerConfig, run_process
from loadtests.sandbox.servers.sleep_mode import DEFAULT_WEIGHTS_MIB, SleepParams, kv_cache_mib
from simulator.engine import BatcherParams, LlmParams
from simulator.engine.device_fit import DoesNotFit

__all__ = ["config_from_args", "configure", "main", "run"]


def _duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a duration: {e}") from None
    if math.isnan(seconds):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} is not a number")
    return seconds


def configure(parser: argparse.ArgumentParser) -> None:
    """The flags, by group: the server, vLLM's and Triton's performance models, sleep mode
    and GPU memory, the GPU device, LoRA adapters, faults."""
    _configure_server(parser)
    _configure_vllm_model(parser)
    _configure_triton_batcher(parser)
    _configure_sleep(parser)
    gpu_device.configure(parser)
    _configure_lora(parser)
    _configure_faults(parser)


def _configure_server(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("server")
    g.add_argument(
        "--engine",
        choices=["vllm", "triton"],
        default="vllm",
        help="which server to imitate (default: vllm)",
    )
    g.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address to listen on (default: 127.0.0.1)",
    )
    g.add_argument(
        "--port",
        type=int,
        default=8000,
        metavar="PORT",
        help="port (default: 8000, as vLLM's; 0: any)",
    )
    g.add_argument(
        "--model",
        default="llama-3.1-8b",
        help="served model name; vllm takes several, comma-separated (default: llama-3.1-8b)",
    )
    g.add_argument(
        "--startup-delay",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="cold start before the server is ready (default: 0s)",
    )
    g.add_argument(
        "--drain-timeout",
        type=_duration,
        default=120.0,
        metavar="DURATION",
        help="on SIGTERM, longest wait for running requests (default: 120s)",
    )
    g.add_argument(
        "--speedup",
        metavar="FACTOR",
        type=float,
        default=1.0,
        help="model time runs this many times faster than wall time (default: 1)",
    )
    g.add_argument(
        "--seed",
        type=int,
        default=None,
        metavar="N",
        help="seed for output lengths and faults (default: a random one)",
    )


def _configure_vllm_model(parser: argparse.ArgumentParser) -> None:
    llm = LlmParams()
    p = parser.add_argument_group("vLLM performance model (defaults: Llama-3.1-8B, 1x H100)")
    p.add_argument(
        "--max-num-seqs",
        metavar="N",
        type=int,
        default=llm.max_num_seqs,
        help=f"most sequences in a batch; the rest wait (default: {llm.max_num_seqs})",
    )
    p.add_argument(
        "--max-num-batched-tokens",
        metavar="TOKENS",
        type=int,
        default=llm.max_num_batched_tokens,
        help=f"token budget of one step (default: {llm.max_num_batched_tokens})",
    )
    p.add_argument(
        "--prefill-tokens-per-s",
        metavar="TOKENS/S",
        type=float,
        default=llm.prefill_tokens_per_s,
        help=f"prefill rate, tokens/s (default: {llm.prefill_tokens_per_s:g})",
    )
    p.add_argument(
        "--step-base-s",
        metavar="SECONDS",
        type=float,
        default=llm.step_base_s,
        help=f"decode step time at batch 0, seconds (default: {llm.step_base_s})",
    )
    p.add_argument(
        "--step-per-seq-s",
        metavar="SECONDS",
        type=float,
        default=llm.step_per_seq_s,
        help=f"step time added per running sequence, seconds (default: {llm.step_per_seq_s})",
    )
    p.add_argument(
        "--kv-cache-tokens",
        metavar="TOKENS",
        type=int,
        default=llm.kv_cache_tokens,
        help=f"KV-cache capacity in tokens (default: {llm.kv_cache_tokens})",
    )
    p.add_argument(
        "--block-size",
        metavar="TOKENS",
        type=int,
        default=DEFAULT_BLOCK_SIZE,
        help=f"tokens per prefix-cache block, as vLLM's flag (default: {DEFAULT_BLOCK_SIZE})",
    )
    p.add_argument(
        "--kv-events-config",
        default=None,
        metavar="JSON",
        help="vLLM's flag: with {\"enable_kv_cache_events\": true} the prefix cache's "
        "events are served at GET /kv_events (default: none)",
    )
    p.add_argument(
        "--mean-output-tokens",
        metavar="TOKENS",
        type=float,
        default=179.0,
        help="mean natural output length without ignore_eos, tokens (default: 179)",
    )
    p.add_argument(
        "--max-model-len",
        metavar="TOKENS",
        type=int,
        default=131_072,
        help="context length, tokens (default: 131072)",
    )


def _configure_triton_batcher(parser: argparse.ArgumentParser) -> None:
    batcher = BatcherParams()
    t = parser.add_argument_group("Triton dynamic batcher")
    t.add_argument(
        "--max-batch-size",
        metavar="N",
        type=int,
        default=batcher.max_batch_size,
        help=f"most items in one execution (default: {batcher.max_batch_size})",
    )
    t.add_argument(
        "--exec-base-s",
        metavar="SECONDS",
        type=float,
        default=batcher.exec_base_s,
        help=f"execution time of a batch, seconds (default: {batcher.exec_base_s})",
    )
    t.add_argument(
        "--exec-per-item-s",
        metavar="SECONDS",
        type=float,
        default=batcher.exec_per_item_s,
        help=f"execution time added per item, seconds (default: {batcher.exec_per_item_s})",
    )


def _configure_sleep(parser: argparse.ArgumentParser) -> None:
    s = parser.add_argument_group("sleep mode and GPU memory (vLLM only)")
    s.add_argument(
        "--enable-sleep-mode",
        action="store_true",
        help="serve /sleep, /wake_up, /is_sleeping, /collective_rpc (with VLLM_SERVER_DEV_MODE=1)",
    )
    s.add_argument(
        "--weights-mib",
        metavar="MIB",
        type=int,
        default=DEFAULT_WEIGHTS_MIB,
        help=f"GPU memory of the weights, MiB (default: {DEFAULT_WEIGHTS_MIB}, Llama-3.1-8B bf16)",
    )
    s.add_argument(
        "--kv-cache-mib",
        metavar="MIB",
        type=int,
        default=None,
        help="GPU memory of the KV cache, MiB (default: 128 KiB per --kv-cache-tokens token)",
    )
    s.add_argument(
        "--gpu-memory-mib",
        metavar="MIB",
        type=int,
        default=None,
        help="framebuffer of the physical GPU, MiB; wakes past it fail (default: the "
        "--gpu-shape device's, else 81920; 0: none)",
    )
    s.add_argument(
        "--gpu-ledger-dir",
        metavar="DIR",
        default=None,
        help="directory shared by the servers on one physical GPU (default: alone on it)",
    )
    s.add_argument(
        "--first-request-penalty",
        type=_duration,
        default=3.0,
        metavar="DURATION",
        help="extra time of the first request after a wake (default: 3s)",
    )


def _configure_faults(parser: argparse.ArgumentParser) -> None:
    f = parser.add_argument_group("faults")
    f.add_argument(
        "--fail-rate",
        metavar="SHARE",
        type=float,
        default=0.0,
        help="share of requests answered with a 5xx, 0-1 (default: 0)",
    )
    f.add_argument(
        "--fail-status",
        type=int,
        default=500,
        metavar="STATUS",
        help="status of those (default: 500)",
    )
    f.add_argument(
        "--break-stream-rate",
        metavar="SHARE",
        type=float,
        default=0.0,
        help="share of streams cut mid-way, 0-1 (default: 0)",
    )
    f.add_argument(
        "--crash-after",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="exit abruptly this long after becoming ready (default: never)",
    )
    f.add_argument(
        "--crash-exit-code",
        type=int,
        default=70,
        metavar="STATUS",
        help="exit status of that crash (default: 70)",
    )


def _lora_module(text: str) -> tuple[str, str]:
    try:
        return parse_lora_module(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _configure_lora(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "LoRA adapters (vLLM only; runtime loading also needs "
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING=true in the environment, as in vLLM)"
    )
    g.add_argument("--enable-lora", action="store_true", help="serve LoRA adapters (default: off)")
    g.add_argument(
        "--max-loras",
        type=int,
        default=1,
        metavar="N",
        help="distinct adapters in one running batch; others wait (default: 1, as vLLM)",
    )
    g.add_argument(
        "--max-cpu-loras",
        type=int,
        default=None,
        metavar="N",
        help="adapters kept in host memory; more are evicted, least recently used first, "
        "and read again on their next request (default: --max-loras)",
    )
    g.add_argument(
        "--lora-modules",
        type=_lora_module,
        nargs="+",
        default=[],
        metavar="NAME=PATH",
        help="adapters loaded at start (default: none)",
    )
    g.add_argument(
        "--lora-load-time",
        type=_duration,
        default=0.5,
        metavar="DURATION",
        help="model time to read one adapter into memory (default: 0.5s)",
    )


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """Build the config; raises ValueError naming what is wrong (DoesNotFit: vLLM's refusal)."""
    llm = gpu_device.engine_on_device(
        args,
        LlmParams(
            max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            prefill_tokens_per_s=args.prefill_tokens_per_s,
            step_base_s=args.step_base_s,
            step_per_seq_s=args.step_per_seq_s,
            kv_cache_tokens=args.kv_cache_tokens,
            prefix_block_tokens=args.block_size,
        ),
    )
    return ServerConfig(
        engine=args.engine,
        model=args.model,
        host=args.host,
        port=args.port,
        startup_delay_s=args.startup_delay,
        speedup=args.speedup,
        kv_events=parse_kv_events_config(args.kv_events_config),
        llm=llm,
        batcher=BatcherParams(
            max_batch_size=args.max_batch_size,
            exec_base_s=args.exec_base_s,
            exec_per_item_s=args.exec_per_item_s,
        ),
        faults=Faults(
            fail_rate=args.fail_rate,
            fail_status=args.fail_status,
            break_stream_rate=args.break_stream_rate,
            crash_after_s=args.crash_after,
            crash_exit_code=args.crash_exit_code,
            seed=args.seed,
        ),
        mean_output_tokens=args.mean_output_tokens,
        max_model_len=args.max_model_len,
        drain_timeout_s=args.drain_timeout,
        seed=args.seed,
        enable_sleep_mode=args.enable_sleep_mode,
        sleep=SleepParams(
            weights_mib=args.weights_mib,
            kv_cache_mib=(
                kv_cache_mib(llm.kv_cache_tokens)
                if args.kv_cache_mib is None
                else args.kv_cache_mib
            ),
            gpu_memory_mib=gpu_device.gpu_memory_mib(args),
            first_request_penalty_s=args.first_request_penalty,
        ),
        gpu_ledger_dir=args.gpu_ledger_dir,
        host_ledger_dir=args.host_ledger_dir,
        host_memory_mib=args.host_memory_mib,
        device=args.gpu_shape,
        lora=LoraParams(
            enable_lora=args.enable_lora,
            max_loras=args.max_loras,
            max_cpu_loras=args.max_cpu_loras,
            lora_modules=tuple(args.lora_modules),
            load_time_s=args.lora_load_time,
            allow_runtime_updating=LoraParams.runtime_updating_from_env(),
        ),
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except DoesNotFit as e:
        # What vLLM prints as it dies at start, and its exit status.
        print(str(e), file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"tidal sandbox model-server: {e}", file=sys.stderr)
        return 2
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(run_process(config))


def main(argv: Sequence[str]) -> int:
    """Parse model-server flags and run (the launcher's children start here)."""
    parser = argparse.ArgumentParser(prog="tidal sandbox model-server")
    configure(parser)
    return run(parser.parse_args(list(argv)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
