"""Targets from a static YAML routes file, for running without Kubernetes.

The format is the one docs/architecture.md shows, exactly::

    targets:
      - name: default/llama          # namespace/name
        models: [llama-3-8b]         # optional, as are hosts and path_prefix
        hosts: [llama.example.com]
        path_prefix: /llama
        endpoints: ["127.0.0.1:8001", "127.0.0.1:8002"]
        container_concurrency: 0
        cold_start_timeout: 10m
        max_buffered: 1000
        resend_unanswered: true      # send once more what a replica closed on unanswered
        adapters: {sql-lora: /models/loras/sql}   # LoRA adapters: name -> source
        adapter_keep_alive: 10m      # an adapter idle this long is unloaded
        default_priority: standard   # class of a held request without x-tidal-priority
        shed_at_zero: false          # refuse sheddable requests at once while none is ready

Left-out limits take the activator's defaults (``--defaults-*``). Durations
are Go-style (``10m``, ``90s``) or plain seconds. A listed endpoint is *not*
ready until a probe reaches it (:mod:`activator.replicas.probing`) and stays ready
only while it accepts connections, so holding through a cold start works
without Kubernetes: list the address a replica will listen on, start it
later.

:func:`parse_routes` is pure and raises ``ValueError`` naming the entry and
key at fault. :class:`RoutesFileSource` polls the file's identity (inode,
size, mtime) every ``poll_s`` and re-reads it on change; a file that stops
parsing is logged and the last good targets stay in force.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

import yaml

from activator.routing.table import RoutingTable
from activator.settings import Defaults
from activator.targets import (
    DEFAULT_ADAPTER_KEEP_ALIVE_S,
    Adapter,
    Discovered,
    Endpoint,
    TargetSink,
    TargetSpec,
    parse_target_name,
)
from groundwork.rules.durations import DURATION_SYNTAX, parse_duration_s
from groundwork.rules.priority import PRIORITY_ALLOWED, parse_priority
from groundwork.rules.routing_keys import (
    DEFAULT_BALANCING,
    DEFAULT_RESEND_UNANSWERED,
    adapter_pairs,
)

__all__ = ["RoutesFileSource", "parse_endpoint", "parse_routes"]

log = logging.getLogger(__name__)

_KEYS = {
    "name",
    "hosts",
    "path_prefix",
    "models",
    "endpoints",
    "container_concurrency",
    "cold_start_timeout",
    "max_buffered",
    "balancing",
    "resend_unanswered",
    "adapters",
    "adapter_keep_alive",
    "default_priority",
    "shed_at_zero",
}


def _adapters(entry: dict[str, object], models: tuple[str, ...], where: str) -> tuple[Adapter, ...]:
    raw = entry.get("adapters") or {}
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise ValueError(f"{where}.adapters: expected a mapping of adapter name to source")
    return adapter_pairs(raw, base_models=models, where=f"{where}.adapters")


def _duration(value: object, *, where: str) -> float:
    """A YAML number of seconds, or a duration string (the annotations' grammar)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{where}: expected {DURATION_SYNTAX} or a number of seconds")
    if isinstance(value, str):
        try:
            return parse_duration_s(value)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    if value < 0:
        raise ValueError(f"{where}: a duration cannot be negative, got {value!r}")
    return float(value)


def parse_endpoint(text: object, *, where: str) -> Endpoint:
    """``"127.0.0.1:8001"`` or ``"[::1]:8001"`` -> Endpoint (not ready until probed)."""
    if not isinstance(text, str):
        raise ValueError(f"{where}: an endpoint is a 'host:port' string, got {text!r}")
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{where}: {text!r} is not 'host:port' with a port 1..65535")
    return Endpoint(host=host, port=int(port_text), ready=False)


def _str_list(value: object, *, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{where}: expected a list of non-empty strings, got {value!r}")
    return tuple(value)


def _int(value: object, *, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: expected a whole number, got {value!r}")
    return value


def parse_routes(text: str, *, defaults: Defaults | None = None) -> dict[str, Discovered]:
    """Parse a routes file; every error names the entry and the key."""
    defaults = defaults or Defaults()
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"routes file is not valid YAML: {exc}") from exc
    if not isinstance(document, dict) or set(document) != {"targets"}:
        raise ValueError("routes file: expected a mapping with one key, 'targets' (a list)")
    entries = document["targets"] or []
    if not isinstance(entries, list):
        raise ValueError("routes file: 'targets' must be a list")
    specs: dict[str, Discovered] = {}
    for index, entry in enumerate(entries):
        where = f"targets[{index}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected a mapping, got {entry!r}")
        unknown = set(entry) - _KEYS
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_KEYS)}")
        if "name" not in entry or not isinstance(entry["name"], str):
            raise ValueError(f"{where}: 'name' (namespace/name) is required")
        name = parse_target_name(entry["name"], key=f"{where}.name")
        where = f"targets[{index}] ({name})"
        if name in specs:
            raise ValueError(f"{where}: target listed twice")
        endpoints = entry.get("endpoints") or []
        if not isinstance(endpoints, list):
            raise ValueError(f"{where}.endpoints: expected a list of 'host:port' strings")
        parsed = tuple(parse_endpoint(e, where=f"{where}.endpoints") for e in endpoints)
        prefix = entry.get("path_prefix")
        if prefix is not None and not isinstance(prefix, str):
            raise ValueError(f"{where}.path_prefix: expected a path such as /llama, got {prefix!r}")
        resend = entry.get("resend_unanswered", DEFAULT_RESEND_UNANSWERED)
        if not isinstance(resend, bool):
            raise ValueError(f"{where}.resend_unanswered: expected true or false, got {resend!r}")
        shed_at_zero = entry.get("shed_at_zero", False)
        if not isinstance(shed_at_zero, bool):
            raise ValueError(f"{where}.shed_at_zero: expected true or false, got {shed_at_zero!r}")
        written = entry.get("default_priority", "standard")
        priority = parse_priority(str(written)) if isinstance(written, str | int) else None
        if priority is None or isinstance(written, bool):
            raise ValueError(
                f"{where}.default_priority: expected {PRIORITY_ALLOWED}, got {written!r}"
            )
        cold = _duration(
            entry.get("cold_start_timeout", defaults.cold_start_timeout_s),
            where=f"{where}.cold_start_timeout",
        )
        keep_alive = _duration(
            entry.get("adapter_keep_alive", DEFAULT_ADAPTER_KEEP_ALIVE_S),
            where=f"{where}.adapter_keep_alive",
        )
        try:
            models = _str_list(entry.get("models"), where=f"{where}.models")
            spec = TargetSpec(
                name=name,
                hosts=_str_list(entry.get("hosts"), where=f"{where}.hosts"),
                path_prefix=prefix,
                models=models,
                container_concurrency=_int(
                    entry.get("container_concurrency", defaults.container_concurrency),
                    where=f"{where}.container_concurrency",
                ),
                cold_start_timeout_s=cold,
                max_buffered=_int(
                    entry.get("max_buffered", defaults.max_buffered), where=f"{where}.max_buffered"
                ),
                balancing=str(entry.get("balancing", DEFAULT_BALANCING)),
                resend_unanswered=resend,
                adapters=_adapters(entry, models, where),
                adapter_keep_alive_s=keep_alive,
                default_priority=priority,
                shed_at_zero=shed_at_zero,
            )
            specs[name] = Discovered(spec, parsed)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from exc
    conflicts = RoutingTable.build(d.spec for d in specs.values()).conflicts
    if conflicts:
        raise ValueError("routes file: " + "; ".join(conflicts))
    return specs


def _identity(path: Path) -> tuple[int, int, int]:
    """What tells an edited or replaced file apart: (inode, size, mtime); raises OSError."""
    stat = os.stat(path)
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


class RoutesFileSource:
    """A TargetSource that reads a routes file and re-reads it when it changes."""

    def __init__(
        self, path: Path, *, poll_s: float = 1.0, defaults: Defaults | None = None
    ) -> None:
        self.path = path
        self.poll_s = poll_s
        self.defaults = defaults or Defaults()
        self._identity: tuple[int, int, int] | None = None

    def load(self) -> dict[str, Discovered]:
        """Read and parse now (raises ValueError/OSError); remembers the file's identity."""
        identity = _identity(self.path)
        text = self.path.read_text(encoding="utf-8")
        specs = parse_routes(text, defaults=self.defaults)
        self._identity = identity
        return specs

    def _changed(self) -> bool:
        try:
            return _identity(self.path) != self._identity
        except OSError:
            return False

    async def run(self, sink: TargetSink) -> None:
        # The first snapshot always goes out (load() may have run already, at
        # start-up, to fail early on a bad file).
        sink.apply(self.load())
        while True:
            await asyncio.sleep(self.poll_s)
            if not self._changed():
                continue
            try:
                specs = self.load()
            except (OSError, ValueError) as exc:
                log.error(
                    "routes file %s not reloaded, keeping the last good one: %s", self.path, exc
                )
                # Remember the bad file too, so it is not re-parsed every poll.
                with contextlib.suppress(OSError):
                    self._identity = _identity(self.path)
                continue
            log.info("routes file %s reloaded: %d target(s)", self.path, len(specs))
            sink.apply(specs)
