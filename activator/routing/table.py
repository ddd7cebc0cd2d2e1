"""Which target a request is for: an immutable table, rebuilt and swapped whole.

The order is the one docs/architecture.md gives, first match wins:

1. ``X-Tidal-Target: namespace/name``, only when the activator runs with
   ``--allow-target-header`` (the proxy strips it before forwarding);
2. the ``Host`` header (port dropped, case folded) against the targets'
   ``hosts``; an exact name beats a ``*.example.com`` wildcard, which
   matches exactly one more label, as Kubernetes Ingress does;
3. the longest ``path_prefix`` that matches on a segment boundary
   (``/llama`` matches ``/llama`` and ``/llama/v1/...``, never ``/llamas``);
4. for ``POST /v1/*`` with a JSON body, its ``model`` field against the
   targets' ``models``. Only this step needs the body, and the proxy reads
   it only when the table has any model at all and nothing earlier matched.

Lookups are dictionary hits (the path is cut at each ``/`` from the longest
end), so their cost does not grow with the number of targets. The table is
never mutated: a source change builds a new one and the registry swaps the
reference, so a request in progress sees one consistent table. Because it
never changes, the answer for a ``(host, path)`` pair is remembered
(:meth:`RoutingTable.route_cached`, bounded): clients send the same few
paths over and over.

The activator is also an OpenAI endpoint in its own right for one request:
``GET /v1/models`` that no header, host or path route claims is answered
from the table (:meth:`RoutingTable.models_listing`): every model routed by
name (LoRA adapters with their ``parent``, as vLLM lists them), whether its
target has replicas or is at zero, since OpenAI clients
list models before they send anything; ``GET /v1/models/{id}`` answers one
of them the same way (:meth:`RoutingTable.model_entry`), as OpenAI's
retrieval does; the other routes clients probe a server with (``/health``,
``/ping``, ``/version``) are :mod:`activator.routing.server_probes`'. A
``model`` that no target serves is a 404 whose message
names it and the models served (:meth:`RoutingTable.unknown_model`;
``no_adapter`` naming the declared LoRA adapters,
:meth:`RoutingTable.unknown_adapter`, where any are); a body
that is not JSON, not an object, or has no ``model`` string is a 400 that
says which (:mod:`activator.routing.model_body`).

Two targets claiming the same host, prefix or model is a configuration error;
:meth:`RoutingTable.build` keeps the first by name and reports the rest as
conflicts (the routes file refuses them; Kubernetes discovery logs them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import unquote

from activator.routing.server_probes import model_card
from activator.targets import TargetSpec

__all__ = ["MODELS_PATH", "TARGET_HEADER", "RoutingTable", "lists_models", "retrieved_model"]

TARGET_HEADER = "X-Tidal-Target"
MODELS_PATH = "/v1/models"
# How many served names a 404 quotes before "and N more": the message stays
# readable with hundreds of models.
_NAMES_IN_MESSAGE = 20
# Remembered routing answers per table; cleared when full, so odd paths
# (query strings) cannot grow it without bound.
_CACHE_SIZE: Final = 4096


def lists_models(method: str, path: str) -> bool:
    """Whether the request is OpenAI's model listing (``GET /v1/models``, any query)."""
    return method in ("GET", "HEAD") and path.split("?", 1)[0].rstrip("/") == MODELS_PATH


def retrieved_model(method: str, path: str) -> str | None:
    """The id of OpenAI's model retrieval (``GET /v1/models/{id}``), else None.

    The id is the rest of the path, percent-decoded: model names often hold
    a ``/`` (``meta-llama/Llama-3.1-8B``), which clients send as it is.
    """
    if method not in ("GET", "HEAD"):
        return None
    rest = path.split("?", 1)[0].removeprefix(MODELS_PATH + "/")
    if rest == path.split("?", 1)[0] or not rest:
        return None
    return unquote(rest)


@dataclass(frozen=True, slots=True)
class RoutingTable:
    """Immutable request -> target lookup."""

    targets: frozenset[str] = frozenset()
    exact_hosts: dict[str, str] = field(default_factory=dict)
    wildcard_hosts: dict[str, str] = field(default_factory=dict)  # ".example.com" -> target
    prefixes: dict[str, str] = field(default_factory=dict)  # "/llama" -> target
    models: dict[str, str] = field(default_factory=dict)
    # LoRA adapter name -> its base model's name (routed by ``models`` too).
    parents: dict[str, str] = field(default_factory=dict)
    conflicts: tuple[str, ...] = ()
    # (Host header, path) -> route(host=..., path=path); the table never changes.
    _cache: dict[tuple[bytes | None, str], str | None] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    @classmethod
    def build(cls, specs: Iterable[TargetSpec]) -> RoutingTable:
        exact: dict[str, str] = {}
        wild: dict[str, str] = {}
        prefixes: dict[str, str] = {}
        models: dict[str, str] = {}
        parents: dict[str, str] = {}
        conflicts: list[str] = []
        names: list[str] = []

        def claim(table: dict[str, str], key: str, name: str, what: str) -> None:
            owner = table.setdefault(key, name)
            if owner != name:
                conflicts.append(
                    f"{what} {key!r} is claimed by {owner} and {name}; {owner} keeps it"
                )

        for spec in sorted(specs, key=lambda s: s.name):
            names.append(spec.name)
            for host in spec.hosts:
                host = host.strip().lower()
                if host.startswith("*."):
                    claim(wild, host[1:], spec.name, "host")
                else:
                    claim(exact, host, spec.name, "host")
            if spec.path_prefix is not None:
                claim(prefixes, _normalise_prefix(spec.path_prefix), spec.name, "path prefix")
            for model in spec.models:
                claim(models, model, spec.name, "model")
            for adapter in spec.adapters:
                claim(models, adapter.name, spec.name, "model")
                if models[adapter.name] == spec.name:
                    parents[adapter.name] = spec.models[0] if spec.models else spec.name
        return cls(
            targets=frozenset(names),
            exact_hosts=exact,
            wildcard_hosts=wild,
            prefixes=prefixes,
            models=models,
            parents=parents,
            conflicts=tuple(conflicts),
        )

    def by_header(self, value: str) -> str | None:
        value = value.strip()
        return value if value in self.targets else None

    def by_host(self, host: str | None) -> str | None:
        if not host or not (self.exact_hosts or self.wildcard_hosts):
            return None
        host = _strip_port(host).lower().rstrip(".")
        found = self.exact_hosts.get(host)
        if found is None and self.wildcard_hosts:
            dot = host.find(".")
            if dot > 0:
                found = self.wildcard_hosts.get(host[dot:])
        return found

    def by_path(self, path: str) -> str | None:
        if not self.prefixes:
            return None
        candidate = path.split("?", 1)[0].rstrip("/") or "/"
        while True:
            found = self.prefixes.get(candidate)
            if found is not None:
                return found
            if candidate == "/":
                return None
            cut = candidate.rfind("/")
            candidate = candidate[:cut] or "/"

    def wants_model(self, method: str, path: str) -> bool:
        """Whether routing by the body's ``model`` could apply to this request."""
        return bool(self.models) and method == "POST" and path.startswith("/v1/")

    def by_model(self, model: object) -> str | None:
        return self.models.get(model) if isinstance(model, str) else None

    def models_listing(self) -> dict[str, object]:
        """The body of ``GET /v1/models`` in OpenAI's shape: every model routed by name.

        A LoRA adapter's ``parent`` is its base model, a base model's is null,
        as vLLM lists them; each card has vLLM's fields
        (:func:`~activator.routing.server_probes.model_card`).
        """
        return {
            "object": "list",
            "data": [
                model_card(model, owner=target, parent=self.parents.get(model))
                for model, target in sorted(self.models.items())
            ],
        }

    def model_entry(self, model: str) -> dict[str, object] | None:
        """The body of ``GET /v1/models/{model}`` in OpenAI's shape; None when not served."""
        target = self.models.get(model)
        if target is None:
            return None
        return model_card(model, owner=target, parent=self.parents.get(model))

    def unknown_model(self, model: str) -> str:
        """The 404 detail for a ``model`` no target serves: what was asked, what is served."""
        served = sorted(self.models)
        listed = ", ".join(repr(name) for name in served[:_NAMES_IN_MESSAGE])
        if len(served) > _NAMES_IN_MESSAGE:
            listed += f" and {len(served) - _NAMES_IN_MESSAGE} more (GET {MODELS_PATH})"
        return f"model {model!r} is not served here; served: {listed or 'none'}"

    def unknown_adapter(self, model: str) -> str:
        """The 404 detail for a ``model`` no target serves, where adapters are declared."""
        declared = sorted(self.parents)
        listed = ", ".join(repr(name) for name in declared[:_NAMES_IN_MESSAGE])
        if len(declared) > _NAMES_IN_MESSAGE:
            listed += f" and {len(declared) - _NAMES_IN_MESSAGE} more (GET {MODELS_PATH})"
        bases = sorted(set(self.models) - set(self.parents))
        return (
            f"model {model!r} is neither a declared LoRA adapter nor a base model; "
            f"adapters: {listed}; base models: {', '.join(repr(b) for b in bases) or 'none'}"
        )

    def route(self, *, host: str | None, path: str, header_target: str | None = None) -> str | None:
        """Steps 1-3 (everything but the body); ``header_target`` only when allowed."""
        if header_target is not None:
            # A named target that does not exist is a 404, not a fall-through:
            # the caller asked for that target and no other.
            return self.by_header(header_target)
        return self.by_host(host) or self.by_path(path)

    def route_cached(self, host: bytes | None, path: str) -> str | None:
        """:meth:`route` without a header target, remembered per ``(host, path)``.

        ``host``: the ``Host`` header's value as sent (bytes), decoded only
        when the answer is not known yet.
        """
        key = (host, path)
        cache = self._cache
        try:
            return cache[key]
        except KeyError:
            pass
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        text = host.decode("latin-1") if host is not None else None
        found = cache[key] = self.by_host(text) or self.by_path(path)
        return found


def _strip_port(host: str) -> str:
    if host.startswith("["):  # [::1]:8080
        end = host.find("]")
        return host[1:end] if end > 0 else host
    colon = host.rfind(":")
    return host[:colon] if colon >= 0 and host.count(":") == 1 else host


def _normalise_prefix(prefix: str) -> str:
    return prefix.rstrip("/") or "/"
