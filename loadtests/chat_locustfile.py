"""Locust: multi-turn chats, or questions over shared documents, through several activators.

What prefix-aware routing is for: a user holds a conversation; each turn
sends the whole history plus a new message (as chat APIs are called), so
its prefix is cached on the replica that served the last turn. Each request
goes to one of ``--activator-hosts`` at random (several activators behind a
Service), so consecutive turns cross activators that share nothing.

    locust -f loadtests/chat_locustfile.py --headless --host http://A:8080 \\
        --activator-hosts http://A:8080,http://B:8080 --busy-users 12 --busy-s 40 \\
        --quiet-users 1 --quiet-s 20 MultiTurnChatUser

A conversation goes on after each turn with probability 0.73 (ShareGPT's
share of multi-turn conversations, as ``simulator.chat_trace``), up to
``--max-turns``. Messages are ``--user-chars`` characters, answers
``--answer-tokens`` tokens (``ignore_eos``, so each is that long); the
answer's text is sent back in the next turn, as a client would.

``SharedDocumentUser`` is the other way prompts share a prefix (RAG, "chat
with a document"): each request is one question over one of
``--documents`` documents of ``--document-chars`` characters, drawn with
Zipf popularity (exponent 1.0, as ``simulator.prefix_workloads``), the
document first and a new question after it, so that requests over one
document share all of it and nothing else.

The shape: ``--busy-users`` for ``--busy-s`` seconds, then ``--quiet-users``
for ``--quiet-s`` (the load drops and the model scales in while the run
goes on), then stop.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from typing import Any

from locust import HttpUser, LoadTestShape, between, task
from locust import events as _locust_events
from locust.env import Environment

_CONTINUE = 0.73
# Locust's event hooks are untyped.
events: Any = _locust_events


def _options(environment: Environment) -> Any:
    """Locust's parsed options, with our flags on them (set before any user runs)."""
    options = environment.parsed_options
    if options is None:
        raise RuntimeError("the chat users need locust's parsed command-line options")
    return options


def _add_arguments(parser: Any) -> None:
    parser.add_argument("--model", default="llama-3-8b", help="the OpenAI model name")
    parser.add_argument(
        "--activator-hosts",
        default="",
        help="comma-separated base URLs; each request picks one (default: --host)",
    )
    parser.add_argument("--user-chars", type=int, default=1200, help="characters per message")
    parser.add_argument("--answer-tokens", type=int, default=32, help="tokens per answer")
    parser.add_argument("--max-turns", type=int, default=8, help="turns per conversation at most")
    parser.add_argument("--system-chars", type=int, default=200, help="shared system prompt")
    parser.add_argument("--documents", type=int, default=1000, help="shared documents")
    parser.add_argument("--document-chars", type=int, default=4000, help="characters each")
    parser.add_argument("--busy-users", type=int, default=12)
    parser.add_argument("--busy-s", type=float, default=40.0)
    parser.add_argument("--quiet-users", type=int, default=1)
    parser.add_argument("--quiet-s", type=float, default=20.0)


events.init_command_line_parser.add_listener(_add_arguments)


class MultiTurnChatUser(HttpUser):
    """One person at a time holding conversations (see the module docstring)."""

    wait_time = between(0.05, 0.2)

    def on_start(self) -> None:
        self.rng = random.Random()
        self._begin()

    def _begin(self) -> None:
        options = _options(self.environment)
        self.messages: list[dict[str, str]] = [
            {"role": "system", "content": "You are a helpful assistant. " * 8}
        ]
        self.messages[0]["content"] = self.messages[0]["content"][: options.system_chars]
        self.conversation = uuid.uuid4().hex
        self.turns = 0

    @task
    def turn(self) -> None:
        options = _options(self.environment)
        hosts = [h for h in options.activator_hosts.split(",") if h] or [self.host]
        text = f"{self.conversation} turn {self.turns}: "
        self.messages.append({"role": "user", "content": text.ljust(options.user_chars, "w")})
        body = {
            "model": options.model,
            "messages": self.messages,
            "max_tokens": options.answer_tokens,
            "ignore_eos": True,
        }
        url = self.rng.choice(hosts).rstrip("/") + "/v1/chat/completions"
        with self.client.post(url, json=body, name="chat turn", catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"HTTP {resp.status_code}: {resp.text[:200]}")
                self._begin()
                return
            answer = resp.json()["choices"][0]["message"]["content"]
        self.messages.append({"role": "assistant", "content": answer})
        self.turns += 1
        if self.turns >= options.max_turns or self.rng.random() >= _CONTINUE:
            self._begin()


class SharedDocumentUser(HttpUser):
    """Questions over Zipf-popular shared documents (see the module docstring)."""

    wait_time = between(0.05, 0.2)

    def on_start(self) -> None:
        options = _options(self.environment)
        self.rng = random.Random()
        self.weights = list(itertools.accumulate(1.0 / (k + 1) for k in range(options.documents)))

    @task
    def ask(self) -> None:
        options = _options(self.environment)
        hosts = [h for h in options.activator_hosts.split(",") if h] or [self.host]
        doc = self.rng.choices(range(options.documents), cum_weights=self.weights)[0]
        text = f"Document {doc}. ".ljust(options.document_chars, "d")
        question = f"Question {uuid.uuid4().hex}: what does document {doc} say?"
        body = {
            "model": options.model,
            "messages": [
                {"role": "system", "content": "Answer from the document."},
                {"role": "user", "content": f"{text}\n\n{question}"},
            ],
            "max_tokens": options.answer_tokens,
            "ignore_eos": True,
        }
        url = self.rng.choice(hosts).rstrip("/") + "/v1/chat/completions"
        with self.client.post(url, json=body, name="document", catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"HTTP {resp.status_code}: {resp.text[:200]}")


class BusyThenQuiet(LoadTestShape):
    """``--busy-users`` for ``--busy-s``, then ``--quiet-users`` for ``--quiet-s``."""

    def tick(self) -> tuple[int, float] | None:
        if self.runner is None:
            return None
        options = _options(self.runner.environment)
        elapsed = time.perf_counter() - self.start_time  # as get_run_time(), typed
        if elapsed < options.busy_s:
            return options.busy_users, float(options.busy_users)
        if elapsed < options.busy_s + options.quiet_s:
            return options.quiet_users, float(options.busy_users)
        return None
