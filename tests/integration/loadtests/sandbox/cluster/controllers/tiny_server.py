"""A tiny stand-in for a model server, for the kubelet tests (stdlib only, fast start).

It waits its startup delay, then answers every GET with 200 (``/fail`` with
500), writes its pid to ``--pidfile`` if asked, and on SIGTERM closes its
listener and exits 0 after ``--term-delay`` seconds (or never, with
``--ignore-term``). ``--exit-after S`` makes it exit with status 3 after S
seconds, to play a crashing server; ``--fail-after S`` answers 500 to
everything after S seconds, to play a server that turns unhealthy. Flags it
does not know (the devices and ledgers the kubelet gives a fake vLLM) are
ignored.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

FAILING = False


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    line = await reader.readline()
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    path = line.split()[1].decode() if len(line.split()) > 1 else "/"
    code = b"500 Internal Server Error" if path == "/fail" or FAILING else b"200 OK"
    writer.write(b"HTTP/1.1 " + code + b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    await writer.drain()
    writer.close()


async def main(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if args.ignore_term:
        loop.add_signal_handler(signal.SIGTERM, lambda: None)
    else:
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    if args.fail_after is not None:

        def fail() -> None:
            global FAILING
            FAILING = True

        loop.call_later(args.fail_after, fail)
    if args.exit_after is not None:
        loop.call_later(args.exit_after, lambda: os._exit(3))
    await asyncio.sleep(args.startup_delay)
    server = await asyncio.start_server(handle, args.host, args.port)
    await stop.wait()
    server.close()
    await asyncio.sleep(args.term_delay)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--startup-delay", type=float, default=0.0)
    parser.add_argument("--term-delay", type=float, default=0.0)
    parser.add_argument("--exit-after", type=float)
    parser.add_argument("--fail-after", type=float)
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--pidfile")
    # The kubelet also hands a fake vLLM its devices and its node's host-memory
    # ledger (--host-ledger-dir, --gpu-shape, ...): a model server's business,
    # not this stand-in's.
    arguments, _ = parser.parse_known_args()
    if arguments.pidfile:
        with open(arguments.pidfile, "a") as f:
            f.write(f"{os.getpid()}\n")
    sys.exit(asyncio.run(main(arguments)))
