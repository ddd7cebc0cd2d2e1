"""docs/statuses.md: every status the activator answers itself, and what a client should do.

The table is rendered from the activator's one table of its own answers
(:data:`activator.statuses.ERROR_STATUS`); the sections after it say, in
prose, what a client should do with each, which answers close the
connection, and how the routes clients probe (``/health``, ``/v1/models``)
are answered while models are at zero.
"""

from __future__ import annotations

from activator.statuses import ERROR_STATUS
from scripts.pages.table import GENERATED, row

__all__ = ["statuses_page"]


def statuses_page() -> str:
    """docs/statuses.md: every status the activator answers itself, with its error code."""
    lines = [
        *_table(),
        *_what_a_client_should_do(),
        *_probe_routes(),
        *_models_route(),
    ]
    return "\n".join(lines)


def _table() -> list[str]:
    lines = [
        "# Statuses and error codes",
        "",
        GENERATED.format(source="`activator/statuses.py` (ERROR_STATUS)"),
        "",
        "The activator passes every response of a model's replica through",
        "unchanged: status, headers and body, streamed as they arrive. The",
        "statuses below are the ones it answers **itself**, when no replica could.",
        "Each has a JSON body in the OpenAI error shape, so OpenAI clients show",
        "the message:",
        "",
        "```json",
        '{"error": {"message": "too many requests are waiting for this model",',
        '           "type": "overloaded_error", "code": "buffer_full"}}',
        "```",
        "",
        "`code` is also the `reason` label of `tidal_activator_rejections_total`",
        "([metrics.md](metrics.md)), so every such answer is counted by why; its",
        "`target` label is the target's `namespace/name` when one was known (empty",
        "for a request refused before it was routed: an unknown model, a body that",
        "cannot be read). The activator's log says each too, with the target and",
        "the message the client got (`refused 404 no_target (target -): model",
        "'gpt-4' is not served here; ...`): the first of each code and target at",
        "once, repeats within 10 s counted in the next line (4xx at INFO, 5xx at",
        "WARNING). The response carries the request's `X-Request-Id` (the",
        "client's, or one the activator made).",
        "",
        row("status", "code", "type", "Retry-After", "when"),
        row("---", "---", "---", "---", "---"),
    ]
    seen = set()
    for spec in sorted(ERROR_STATUS.values(), key=lambda e: (e.status, e.code, e.message)):
        if (spec.status, spec.code, spec.message) in seen:
            continue
        seen.add((spec.status, spec.code, spec.message))
        lines.append(
            row(
                str(spec.status),
                f"`{spec.code}`",
                f"`{spec.type}`",
                "yes" if spec.retry_after else "",
                spec.message,
            )
        )
    return lines


def _what_a_client_should_do() -> list[str]:
    return [
        "",
        "## What a client should do",
        "",
        "- **503** (`buffer_full`, `shed`, `held_bodies_full`, `draining`): retry after",
        "  `Retry-After` seconds; another activator replica may take it at once. While",
        "  the model wakes, `Retry-After` is the expected time left until a replica is",
        "  ready (the last wake this activator measured for the model, 60 s before the",
        "  first, less what has passed), so a client comes back once, when it is",
        "  likely to be served; otherwise it is the activator's `--retry-after-s`",
        "  (1 s). Many `buffer_full` mean the model cannot scale out fast enough (see",
        "  the `TidalActivatorBufferNearFull` alert in [operating.md](operating.md)).",
        "  A `shed` message says which rule fired: a request of a higher class took",
        "  its place, its tenant held more than its share, or it is sheddable and",
        "  the model is waking (`routing.tidal.dev/shed-at-zero`); the log line and",
        "  the `cause` label of `tidal_activator_shed_total` say the same",
        "  ([priority.md](priority.md)).",
        "- **503** `adapter_load_failed`, `lora_unsupported`: a request for a LoRA",
        "  adapter that the model's ready replicas cannot serve, answered as soon as",
        "  that is known rather than held: every replica refused the load (the",
        "  message gives the last answer; they are asked again after a minute), or",
        "  none can load adapters at all (`lora_unsupported`: start vLLM with",
        "  `--enable-lora` and `VLLM_ALLOW_RUNTIME_LORA_UPDATING=true`; no",
        "  `Retry-After`, since an operator must act). An `AdapterLoadRefused`",
        "  Warning Event on the Deployment says the same ([adapters.md](adapters.md)).",
        "- **503** `not_woken`: Tidal will not wake the model until an operator",
        "  fixes the annotation the message names (`InvalidAnnotation` Event on",
        "  the Deployment); there is no `Retry-After`, since nobody knows when, and",
        "  `x-should-retry: false` tells OpenAI's clients not to retry it at once.",
        "  Retrying is safe and cheap (each answer comes at once), and the first",
        "  request after the fix wakes the model.",
        "- **504** (`cold_start_timeout`): no replica became ready within the",
        "  model's `routing.tidal.dev/cold-start-timeout`",
        "  ([annotations.md](annotations.md)). Retrying is safe: the request",
        "  never reached a replica.",
        "- **502**: `all_refused` never reached a replica either (every ready",
        "  replica refused the connection until the cold-start timeout);",
        "  `upstream_failed` did reach one, which then failed (or, sent a",
        "  second time, failed again), so the request may have had effects:",
        "  the activator does not send it again.",
        "- **404** (`no_target`): nothing routes this request: check the Host,",
        "  the path prefix or the `model` field against the routing annotations.",
        "  `no_adapter`: the `model` is no declared LoRA adapter (also for a request",
        "  held for an adapter whose declaration was removed while it waited).",
        "- **408** (`body_timeout`): the client stopped sending its body for",
        "  longer than `timeouts.client_body_idle_s` (60 s); send it again, whole.",
        "- **408** (`head_timeout`): the request head was not complete within",
        "  `timeouts.client_head_s` (60 s) of its first byte. Nothing reached a",
        "  replica; send it again, on a new connection.",
        "- **413** (`body_too_large`): the body is over",
        "  `limits.max_model_body_bytes` (8 MiB, a body read whole to route by",
        "  `model`) or `limits.max_body_bytes` (no limit by default). The answer",
        "  comes as the limit is crossed, while the client may still be sending.",
        "  A body read to route by `model` never reached a replica; a streamed one",
        "  may have begun to, and the replica's connection is then aborted, so it",
        "  never gets a whole request. Do not retry it unchanged.",
        "- **431** (`head_too_large`): the request line or one header line is over",
        "  `limits.max_header_bytes` (8190 bytes), the head has more than",
        "  `limits.max_headers` (128) lines, or it is over `limits.max_head_bytes`",
        "  (64 KiB) in all: send fewer or shorter headers (large cookies, long",
        "  URLs); retrying unchanged fails the same way.",
        "- **501** (`unsupported_transfer_encoding`): the activator decodes only",
        "  `Transfer-Encoding: chunked`, as nginx does; send the body with",
        "  `Content-Length` or plain `chunked` (a compressed body belongs in",
        "  `Content-Encoding`, which is passed to the replica untouched).",
        "- **505** (`unsupported_http_version`): the activator speaks HTTP/1.1",
        "  and HTTP/1.0 only; an HTTP/2 client goes through an ingress or load",
        "  balancer that speaks HTTP/1.1 to the activator.",
        "- **400**, **405**: the request itself is wrong; do not retry it unchanged.",
        "",
        "The 400s `bad_request` and `bad_framing`, the 408 `head_timeout`, 431,",
        "501 and 505 close the connection after the answer: where the next",
        "request would start is in doubt. Those decided on the head (all but a",
        "`bad_framing` for a malformed chunk) come before any of the request",
        "reaches a replica.",
        "",
        "A request body is streamed to the replica as it arrives, except one read",
        "whole to route by `model`. So a chunked body whose chunk breaks after",
        "valid ones, in a later read, gets its 400 `bad_framing` when the broken",
        "chunk arrives, and by then the replica has the head and the valid",
        "chunks: its connection is aborted without the last chunk, so it never",
        "sees a whole request. nginx with `proxy_request_buffering off` does the",
        "same (the head and the valid chunks reach the upstream, then the",
        "connection is closed); nginx by default reads the whole body before it",
        "connects, and forwards nothing of such a request.",
        "",
    ]


def _probe_routes() -> list[str]:
    return [
        "## The routes clients probe: `/health`, `/ping`, `/version`, `/v1/models`",
        "",
        "Benchmark tools and OpenAI clients check a server before they send it",
        "work (GuideLLM stops unless `GET /health` is a 2xx; `vllm bench serve`",
        "reads the first model's `id` and `root` from `GET /v1/models`). Where no",
        "target claims the route by header, host or path prefix (then it goes to",
        "that target's replicas, held while they wake), the activator answers",
        "these itself, in vLLM's shapes, whether the models have replicas or are",
        "at zero (it takes their requests either way):",
        "",
        row("route", "at zero replicas, and at any other time"),
        row("---", "---"),
        row("`GET /health`", "200, empty body; 503 `draining` while the activator shuts down"),
        row("`GET /ping`, `POST /ping`", "the same (SageMaker's route, which vLLM serves too)"),
        row(
            "`GET /version`",
            '200 `{"version": "<Tidal\'s version>", "server": "tidal-activator"}`',
        ),
        row("`GET /v1/models`", "200, every model routed by name, at zero too (below)"),
        row("`GET /v1/models/{id}`", "200, that model's card; 404 `no_target` if not served"),
        "",
        "The model cards carry vLLM's fields: `id`, `object`, `created` (0),",
        "`owned_by` (the target that serves it), `root` (the served name: vLLM's",
        "is the model's path, the same unless `--served-model-name` renames it;",
        "give `vllm bench serve` `--tokenizer` where it differs), `parent` (a",
        "LoRA adapter's base model), `max_model_len` (null: only a replica knows",
        "its context length) and `permission`.",
        "",
    ]


def _models_route() -> list[str]:
    return [
        "## `GET /v1/models`",
        "",
        "OpenAI clients list the models before they send anything. A",
        "`GET /v1/models` that no host or path route claims (those forward it to",
        "their target) is answered by the activator itself: every model routed by",
        "name (`routing.tidal.dev/models`), including those scaled to zero, in",
        "OpenAI's list shape, with the serving target as `owned_by`. A `model`",
        "that no target serves is a 404 `no_target` whose message names the",
        "model asked for and those served. `GET /v1/models/{id}` answers one of",
        "them in the same shape, as OpenAI's model retrieval does (a 404",
        "`no_target` for a model not served). A body read for its `model` gets a",
        "400 that says what is wrong: `invalid_json` (with the parser's message",
        "and position: line, column, character), `body_not_object` (JSON, but a",
        "list or a string...), or `bad_model` (no `model`, or not a non-empty",
        "string).",
        "",
        "A request that reached no replica (the connection was refused or reset",
        "before any byte was sent) goes back to waiting, on another replica or",
        "for the next ready one, within its cold-start timeout. So does, once, a",
        "request whose replica closed or reset the connection before a byte of",
        "answer, when its body is still at hand (read whole to route by `model`,",
        "or streamed and at most 64 KiB): that is how a server closes a",
        "keep-alive connection as idle or at shutdown (vLLM under uvicorn closes",
        "every idle one at SIGTERM, which is how a replica is scaled down), and",
        "a request written as it closes was never read. A replica that died",
        "while generating an answer it had not begun to send looks the same;",
        "generating it again costs GPU time but has no other effect, and",
        "happening once, a request that crashes replicas takes down at most",
        "two. `tidal_activator_resent_total` counts these. Once the answer",
        "has begun, or on the second failure, the request is not sent again.",
        'A model annotated `routing.tidal.dev/resend-unanswered: "false"`',
        "([annotations.md](annotations.md)) never has a request sent again: a",
        "replica that closed the connection unanswered is a 502 `upstream_failed`.",
        "",
    ]
