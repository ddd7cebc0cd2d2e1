"""Fixtures shared by the activator's integration tests (real HTTP on loopback)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest_asyncio

from tests.integration.activator.helpers import FakeScaler


@pytest_asyncio.fixture
async def scaler() -> AsyncIterator[FakeScaler]:
    fake = await FakeScaler().start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest_asyncio.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    # limit=0: tests hold many requests at once; aiohttp's default is 100.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        yield session
