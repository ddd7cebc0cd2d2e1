"""Load generator run as a separate process: N concurrent requests, statuses as JSON.

Usage: python load_client.py URL COUNT TIMEOUT_S
Prints one JSON line: {"statuses": {"200": n, ...}, "errors": n, "elapsed_s": x}.
"""

from __future__ import annotations

import asyncio
import collections
import json
import sys
import time

import aiohttp


async def main(url: str, count: int, timeout_s: float) -> None:
    statuses: collections.Counter[str] = collections.Counter()
    errors = 0
    # limit=0: aiohttp's default of 100 connections would serialize the burst.
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    started = time.monotonic()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one(i: int) -> None:
            nonlocal errors
            try:
                async with session.post(url, json={"i": i}) as resp:
                    await resp.read()
                    statuses[str(resp.status)] += 1
            except (aiohttp.ClientError, TimeoutError):
                errors += 1

        await asyncio.gather(*(one(i) for i in range(count)))
    print(
        json.dumps(
            {"statuses": statuses, "errors": errors, "elapsed_s": time.monotonic() - started}
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
