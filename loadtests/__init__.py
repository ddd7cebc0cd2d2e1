"""Load tests (locust), the demo, benchmarks and the sandbox (emulated cluster, fake servers).

At the top: the locust load tests and what they share with the benchmarks
(``locustfile``, ``shapes``, ``schedules``, ``traces``, ``streaming``,
``payloads``, ``replicas_sampler``, ``report``); ``demo/`` is ``tidal demo``;
``sandbox/`` the emulated cluster and fake servers; ``bench/`` the benchmarks.
"""
