"""The fault suite's load generator: open-loop streaming completions, each fate recorded.

Run as its own process (``python -m tests.e2e.faults.load_client CONFIG_JSON``)
so that it neither shares an event loop with the in-process sandbox nor
slows it down. It sends ``rate`` streaming ``/v1/completions`` per second
(open loop: on schedule, whatever the earlier ones are doing), round robin
over the activators it is told to use, each on a fresh connection (so no
request rides a kept-alive connection that an activator is closing), and
classifies every request's end (:mod:`tests.e2e.faults.fates`).

It is steered by lines on stdin, so the test can strike a fault at a known
point of the load:

- ``rate R``: requests per second from now on (0: none);
- ``burst N``: N requests at once;
- ``avoid I`` / ``use I``: stop or resume sending to activator I (what a load
  balancer does when an activator's readiness fails: the test says it before
  it stops the activator, so no request meets a closed listener);
- ``phase NAME``: the phase recorded with every request sent from now on;
- ``stop``: send nothing more, wait for what is outstanding, print the
  records as one JSON line and exit.

It prints ``started`` once it is ready for commands. Bounded: at most
``max_requests`` requests, ``max_duration_s`` in all (then it stops as if
told), ``timeout_s`` per request; loopback addresses only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from tests.e2e.faults.fates import Record, classify_error_body


@dataclass(frozen=True, slots=True)
class Config:
    urls: tuple[str, ...]
    model: str
    max_tokens: int = 40
    rate: float = 0.0
    timeout_s: float = 60.0
    max_requests: int = 2000
    max_duration_s: float = 240.0

    @classmethod
    def parse(cls, text: str) -> Config:
        data = json.loads(text)
        config = cls(**{**data, "urls": tuple(data["urls"])})
        for url in config.urls:
            host = urlsplit(url).hostname or ""
            if not ipaddress.ip_address(host).is_loopback:
                raise ValueError(f"load goes to loopback addresses only; got {url}")
        if not config.urls:
            raise ValueError("urls: at least one activator URL is needed")
        return config


class LoadClient:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.rate = config.rate
        self.avoided: set[int] = set()
        self.phase = ""
        self.records: list[Record] = []
        self.crashes: list[str] = []
        self._burst = 0  # requests to send at once, set by a "burst" command
        self._next = 0  # round-robin position
        self._sent = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._rate_changed = asyncio.Event()

    def _now(self) -> float:
        return time.monotonic()

    def _pick(self) -> int | None:
        count = len(self.config.urls)
        for _ in range(count):
            index = self._next % count
            self._next += 1
            if index not in self.avoided:
                return index
        return None

    def _launch(self, session: aiohttp.ClientSession) -> None:
        if self._sent >= self.config.max_requests:
            return
        number = self._sent
        self._sent += 1
        activator = self._pick()
        if activator is None:
            now = self._now()
            self.records.append(
                Record(number, -1, now, now, "refused", self.phase, detail="no activator in use")
            )
            return
        task = asyncio.create_task(self._guarded(session, number, activator, self.phase))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(
        self, session: aiohttp.ClientSession, number: int, activator: int, phase: str
    ) -> None:
        """A bug here must not pass for a fate: it is kept, and the client exits 1."""
        try:
            await self._one(session, number, activator, phase)
        except Exception:
            self.crashes.append(traceback.format_exc())

    async def _one(
        self, session: aiohttp.ClientSession, number: int, activator: int, phase: str
    ) -> None:
        sent = self._now()
        url = f"{self.config.urls[activator]}/v1/completions"
        body = {
            "model": self.config.model,
            "prompt": f"request {number}",
            "max_tokens": self.config.max_tokens,
            "ignore_eos": True,
            "stream": True,
        }

        def record(fate: str, **kw: Any) -> None:
            self.records.append(Record(number, activator, sent, self._now(), fate, phase, **kw))

        status = 0
        try:
            async with session.post(url, json=body) as resp:
                status = resp.status
                if status != 200:
                    payload = await resp.read()
                    code = classify_error_body(payload)
                    if code is None:
                        record(
                            "bad_error",
                            status=status,
                            detail=payload[:200].decode(errors="replace"),
                        )
                    else:
                        message = json.loads(payload)["error"]["message"]
                        record("error", status=status, code=code, message=message)
                    return
                tokens, done = 0, False
                async for line in resp.content:
                    if line.startswith(b"data: [DONE]"):
                        done = True
                    elif line.startswith(b"data: "):
                        tokens += 1
                if done and tokens == self.config.max_tokens:
                    record("completed", status=200)
                else:
                    record("cut", status=200, detail=f"{tokens} tokens, done={done}")
        except aiohttp.ClientConnectorError as exc:
            fate = "refused" if isinstance(exc.os_error, ConnectionRefusedError) else "no_answer"
            record(fate, detail=repr(exc))
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            record("cut" if status == 200 else "no_answer", status=status, detail=repr(exc))

    async def _commands(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while not self._stopping.is_set():
            line = (await reader.readline()).decode().strip()
            if not line:  # EOF: the test is gone; stop as if told
                self._stopping.set()
                return
            verb, _, arg = line.partition(" ")
            if verb == "rate":
                self.rate = float(arg)
                self._rate_changed.set()
            elif verb == "burst":
                self._burst = int(arg)
                self._rate_changed.set()
            elif verb == "avoid":
                self.avoided.add(int(arg))
            elif verb == "use":
                self.avoided.discard(int(arg))
            elif verb == "phase":
                self.phase = arg
            elif verb == "stop":
                self._stopping.set()
            else:
                print(f"unknown command {line!r}", file=sys.stderr, flush=True)

    async def _schedule(self, session: aiohttp.ClientSession) -> None:
        """Open loop: request n of a rate period goes at its time, whatever came before."""
        loop = asyncio.get_running_loop()
        period_start, sent_in_period, rate = loop.time(), 0, self.rate
        while not self._stopping.is_set():
            if self._burst:
                for _ in range(self._burst):
                    self._launch(session)
                self._burst = 0
            if self.rate != rate:
                period_start, sent_in_period, rate = loop.time(), 0, self.rate
            self._rate_changed.clear()
            if rate > 0:
                due = period_start + sent_in_period / rate
                if loop.time() >= due:
                    self._launch(session)
                    sent_in_period += 1
                    continue
                wait = due - loop.time()
            else:
                wait = 1.0
            stop = asyncio.ensure_future(self._stopping.wait())
            change = asyncio.ensure_future(self._rate_changed.wait())
            await asyncio.wait({stop, change}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            change.cancel()

    async def run(self) -> list[Record]:
        timeout = aiohttp.ClientTimeout(total=self.config.timeout_s)
        # force_close: a fresh connection per request; limit=0: no pool cap.
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            commands = asyncio.create_task(self._commands())
            print("started", flush=True)
            try:
                await asyncio.wait_for(self._schedule(session), self.config.max_duration_s)
            except TimeoutError:
                print("max_duration_s reached: stopping", file=sys.stderr, flush=True)
            commands.cancel()
            if self._tasks:
                await asyncio.wait(set(self._tasks))
        return sorted(self.records, key=lambda r: r.index)


def main() -> int:
    config = Config.parse(sys.argv[1])
    client = LoadClient(config)
    records = asyncio.run(client.run())
    for crash in client.crashes:
        print(crash, file=sys.stderr, flush=True)
    print(json.dumps({"records": [asdict(r) for r in records]}), flush=True)
    return 1 if client.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
