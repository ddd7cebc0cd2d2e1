"""Pure decision logic: no asyncio, aiohttp or Kubernetes imports, time passed in.

An import contract (``make lint``) keeps this package free of I/O so that every
decision can be tested by stepping a simulated clock.
"""
