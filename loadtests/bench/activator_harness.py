"""Shared pieces of the activator benchmarks (not a benchmark itself).

A benchmark of a proxy is only as good as the tools around it: a Python load
generator or backend saturates before the proxy does and hides its cost
(docs/architecture.md, "Working rules"). So every tool here is native and from Debian, or a small C
program built with Debian's gcc, and every benchmark also measures the
tools *directly* (no proxy) in the same run, to show that they outrun the
proxy (:func:`outrun_check`):

- **backends**: nginx answering a 2-byte body (small requests); ``sse_tool
  serve`` (``sse_tool.c``) streaming timestamped server-sent events;
- **load generators**: ``wrk`` (closed-loop throughput), ``hey -q``
  (requests at a fixed rate per connection, every latency kept),
  ``sse_tool load`` (per-event lateness), ``hey -n N -c N`` (a burst of
  held requests);
- **proxies**: the activator (one worker), and nginx and haproxy (one worker
  or thread each) as references, proxying the same backend with keep-alive
  upstream connections.

Placement: the proxy under test runs alone on core 0 (``taskset``), the
load generator and the backend on core 1, and proxies take turns, so no two
of them compete (the others sit idle). Everything runs at a raised priority
when root (:func:`pinned`). Measurements are repeated in alternating rounds
(nginx, haproxy, activator, nginx, ...) and each figure is the median over
the rounds, so a burst of load from something else on the machine falls on
all of them alike rather than on one. CPU time comes from the proxy's own
``/proc/PID/stat`` counters (its whole process tree).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PROXIES",
    "PROXY_CPU",
    "TOOLS_CPU",
    "Proc",
    "ThroughputResult",
    "free_port",
    "headroom_check",
    "hey_burst",
    "hey_rate",
    "load_report",
    "median",
    "metric",
    "outrun_check",
    "percentile",
    "pinned",
    "proxies",
    "raise_fd_limit",
    "routes_for",
    "rss_mb",
    "sse_load",
    "start_activator",
    "start_haproxy",
    "start_nginx_backend",
    "start_nginx_backends",
    "start_nginx_proxy",
    "start_sse_backend",
    "tools_cpu_s",
    "tree_cpu_s",
    "verdict",
    "workdir",
    "wrk",
]

# The proxy alone on one core; load generator and backend on the other.
PROXY_CPU = "0"
TOOLS_CPU = "1" if (os.cpu_count() or 1) > 1 else "0"

_HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def raise_fd_limit() -> None:
    """Soft open-file limit up to the hard one (inherited by the tools we start)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def load_report() -> str:
    """What else the machine was doing: the load average, for the figures' context."""
    sys.stdout.flush()
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def _tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    if path is None:
        raise RuntimeError(
            f"{name} is not installed: run scripts/ensure-debian-packages as root "
            "(make bench does), or apt-get install it"
        )
    return path


@dataclass
class Proc:
    """A started process and the port it serves."""

    popen: subprocess.Popen[bytes]
    port: int
    name: str

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stop(self, sig: int = signal.SIGTERM) -> bytes:
        """Stop it (SIGKILL after 15 s); its captured stdout, if any."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        try:
            out, _ = self.popen.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            out, _ = self.popen.communicate()
        return out or b""


def pinned(cpu: str) -> list[str]:
    """The command prefix that runs a benchmark process on ``cpu``, raised in priority.

    Everything a benchmark starts (proxies, references and tools alike) runs
    at the same raised priority when allowed (root), so processes that share
    the machine (a test suite beside it) disturb the figures less; the
    comparison stays fair because no participant gets more than another.
    """
    prefix = ["taskset", "-c", cpu]
    if os.geteuid() == 0:
        prefix = ["nice", "-n", str(_NICE), *prefix]
    return prefix


_NICE = -10


def _spawn(cpu: str, args: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*pinned(cpu), *args], **kwargs)  # type: ignore[call-overload,no-any-return]


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout_s}s")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            raw = Path(f"/proc/{entry}/stat").read_text()
            # The command may hold spaces and parentheses: fields start after the last ')'.
            fields = raw[raw.rindex(")") + 2 :].split()
            parent[int(entry)] = int(fields[1])
            ticks[int(entry)] = int(fields[11]) + int(fields[12])
    wanted = {pid}
    grew = True
    while grew:
        more = {p for p, pp in parent.items() if pp in wanted} - wanted
        grew = bool(more)
        wanted |= more
    return sum(ticks.get(p, 0) for p in wanted) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="tidal-bench-") as tmp:
        yield Path(tmp)


# --- backends and proxies ---------------------------------------------------------

_NGINX_COMMON = """
worker_processes 1;
daemon off;
pid {dir}/nginx-{port}.pid;
error_log {dir}/nginx-{port}-error.log warn;
worker_rlimit_nofile 30000;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    {body}
}}
"""


def _start_nginx(
    cpu: str, tmp: Path, server: Callable[[int], str], name: str, port: int | None = None
) -> Proc:
    """nginx (one worker) with the ``http`` block's servers from ``server(port)``."""
    nginx = _tool("nginx")
    port = port or free_port()
    conf = tmp / f"nginx-{port}.conf"
    conf.write_text(_NGINX_COMMON.format(dir=tmp, port=port, body=server(port)))
    proc = _spawn(cpu, [nginx, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "nginx.log")])
    _wait_port(port, proc)
    return Proc(proc, port, name)


def start_nginx_backend(cpu: str, tmp: Path, port: int | None = None) -> Proc:
    """nginx answering every request with a 2-byte body: a backend faster than any proxy."""

    def server(port: int) -> str:
        return f"""
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{ default_type text/plain; return 200 "ok"; }}
    }}"""

    return _start_nginx(cpu, tmp, server, "backend", port)


def start_nginx_backends(cpu: str, tmp: Path, count: int) -> tuple[Proc, list[int]]:
    """One nginx answering as :func:`start_nginx_backend` on ``count`` ports: as many replicas."""
    extra = [free_port() for _ in range(count - 1)]

    def server(port: int) -> str:
        listens = "".join(f"listen 127.0.0.1:{p} backlog=4096; " for p in (port, *extra))
        return f"""
    server {{
        {listens}
        location / {{ default_type text/plain; return 200 "ok"; }}
    }}"""

    proc = _start_nginx(cpu, tmp, server, "backends")
    return proc, [proc.port, *extra]


def start_nginx_proxy(cpu: str, tmp: Path, backend_port: int) -> Proc:
    """nginx as a reverse proxy (one worker, pooled keep-alive upstream, no buffering)."""

    def server(port: int) -> str:
        return f"""
    upstream backend {{
        server 127.0.0.1:{backend_port};
        keepalive 512;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 120s;
        }}
    }}"""

    return _start_nginx(cpu, tmp, server, "nginx")


def start_haproxy(cpu: str, tmp: Path, backend_port: int) -> Proc:
    """haproxy as a reverse proxy (one thread, connections to the backend reused)."""
    port = free_port()
    conf = tmp / f"haproxy-{port}.cfg"
    conf.write_text(
        f"""
global
    nbthread 1
    # Two descriptors per proxied connection, within the 20,000 open files here.
    maxconn 9000
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    http-reuse always
    option http-keep-alive
    # Send relayed data at once rather than with MSG_MORE (server-sent events).
    option http-no-delay
frontend bench
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    server r1 127.0.0.1:{backend_port}
"""
    )
    proc = _spawn(cpu, [_tool("haproxy"), "-db", "-f", str(conf)], stderr=subprocess.DEVNULL)
    _wait_port(port, proc)
    return Proc(proc, port, "haproxy")


def start_activator(cpu: str, tmp: Path, routes_text: str, *extra: str) -> tuple[Proc, int]:
    """One activator worker on a static routes file; (process, admin port)."""
    port, admin = free_port(), free_port()
    routes = tmp / f"routes-{port}.yaml"
    routes.write_text(routes_text)
    proc = _spawn(
        cpu,
        [
            sys.executable, "-m", "scaler.cli", "activator", "--routes", str(routes),
            "--host", "127.0.0.1", "--port", str(port), "--admin-host", "127.0.0.1",
            "--admin-port", str(admin), "--scaler-url", "http://127.0.0.1:9",
            "--log-level", "ERROR", *extra,
        ],
    )  # fmt: skip
    _wait_port(admin, proc)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"http://127.0.0.1:{admin}/readyz", timeout=2) as r,
        ):
            if r.status == 200:
                break
        time.sleep(0.05)
    return Proc(proc, port, "activator"), admin


def routes_for(name: str, backend_port: int, **fields: object) -> str:
    """A one-target routes file sending every path to ``backend_port``."""
    extra = "".join(f"    {k}: {v}\n" for k, v in fields.items())
    return (
        f"targets:\n  - name: bench/{name}\n    path_prefix: /\n"
        f'    endpoints: ["127.0.0.1:{backend_port}"]\n{extra}'
    )


PROXIES = ("nginx", "haproxy", "activator")


@contextlib.contextmanager
def proxies(tmp: Path, backend_port: int, name: str) -> Iterator[dict[str, Proc]]:
    """nginx, haproxy and one activator worker, each proxying ``backend_port`` on core 0.

    They idle while another is measured; each is warmed up by its first round.
    """
    started: dict[str, Proc] = {}
    try:
        started["nginx"] = start_nginx_proxy(PROXY_CPU, tmp, backend_port)
        started["haproxy"] = start_haproxy(PROXY_CPU, tmp, backend_port)
        started["activator"], _ = start_activator(PROXY_CPU, tmp, routes_for(name, backend_port))
        yield started
    finally:
        for proc in started.values():
            proc.stop()


def metric(admin_port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith((name + "{", name + " "))
    )


# --- load generators --------------------------------------------------------------


@dataclass(frozen=True)
class ThroughputResult:
    rps: float
    requests: int
    errors: int  # non-2xx/3xx answers plus socket errors


def wrk(
    cpu: str, port: int, *, conns: int, duration_s: float, script: Path | None = None
) -> ThroughputResult:
    """Closed-loop throughput: ``conns`` keep-alive connections, back to back.

    ``script``: a wrk Lua script that makes the requests (default: GET /v1/small).
    """
    lua = ["-s", str(script)] if script is not None else []
    out = subprocess.run(
        [
            *pinned(cpu), _tool("wrk"), "-t1", f"-c{conns}", f"-d{duration_s:g}s", *lua,
            f"http://127.0.0.1:{port}/v1/small",
        ],
        check=True, capture_output=True, text=True, timeout=duration_s + 60,
    ).stdout  # fmt: skip
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    total = re.search(r"(\d+) requests in", out)
    if rps is None or total is None:
        raise RuntimeError(f"cannot read wrk's output:\n{out}")
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    for match in re.findall(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    ):
        errors += sum(int(n) for n in match)
    return ThroughputResult(float(rps.group(1)), int(total.group(1)), errors)


@dataclass(frozen=True)
class RateResult:
    p50_ms: float
    p99_ms: float
    achieved_rps: float
    requests: int
    errors: int


def hey_rate(cpu: str, port: int, *, conns: int, rate: float, duration_s: float) -> RateResult:
    """``rate`` requests/s spread over ``conns`` connections (``hey -q``), every latency kept.

    hey paces each connection (worker) at ``rate / conns`` requests/s and
    waits for each answer before the next, so a proxy that stalls shows as a
    rate below the one asked for; :func:`rate_check` reports it.
    """
    per_conn = rate / conns
    out = subprocess.run(
        [
            *pinned(cpu), _tool("hey"), "-c", str(conns), "-q", f"{per_conn:g}",
            "-z", f"{duration_s:g}s", "-o", "csv", f"http://127.0.0.1:{port}/v1/small",
        ],
        check=True, capture_output=True, text=True, timeout=duration_s + 60,
    ).stdout  # fmt: skip
    latencies: list[float] = []
    errors = 0
    for row in csv.DictReader(io.StringIO(out)):
        latencies.append(float(row["response-time"]) * 1000)
        if not row["status-code"].startswith("2"):
            errors += 1
    return RateResult(
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
        achieved_rps=len(latencies) / duration_s,
        requests=len(latencies),
        errors=errors,
    )


def hey_burst(cpu: str, port: int, *, count: int, timeout_s: float) -> subprocess.Popen[str]:
    """``count`` connections, one request each, all at once (read its summary from stdout)."""
    return subprocess.Popen(
        [
            *pinned(cpu), _tool("hey"), "-n", str(count), "-c", str(count),
            "-t", f"{timeout_s:g}", f"http://127.0.0.1:{port}/v1/held",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def hey_statuses(summary: str) -> dict[str, int]:
    """Status counts from hey's summary, errors under ``error``."""
    found = {code: int(n) for code, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", summary)}
    section = summary.split("Error distribution:", 1)
    if len(section) == 2:
        errors = sum(int(n) for n in re.findall(r"\[(\d+)\]", section[1]))
        if errors:
            found["error"] = errors
    return found


def _sse_tool() -> str:
    """``sse_tool.c`` built with Debian's gcc, cached by the source's hash."""
    source = _HERE / "sse_tool.c"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tidal-bench"
    binary = cache / f"sse_tool-{digest}"
    if not binary.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = binary.with_suffix(f".{os.getpid()}")
        subprocess.run([_tool("gcc"), "-O2", "-o", str(partial), str(source)], check=True)
        partial.rename(binary)
    return str(binary)


def start_sse_backend(cpu: str, *, rate: int, events: int) -> Proc:
    port = free_port()
    proc = _spawn(
        cpu, [_sse_tool(), "serve", str(port), str(rate), str(events)], stdout=subprocess.PIPE
    )
    _wait_port(port, proc)
    return Proc(proc, port, "sse-backend")


def sse_load(cpu: str, port: int, *, streams: int, timeout_s: float) -> dict[str, float]:
    """Read ``streams`` event streams to their end; lateness percentiles in ms."""
    out = subprocess.run(
        [*pinned(cpu), _sse_tool(), "load", str(port), str(streams), f"{timeout_s:.0f}"],
        check=True, capture_output=True, text=True, timeout=timeout_s + 30,
    ).stdout  # fmt: skip
    return dict(json.loads(out))


# --- verdicts ---------------------------------------------------------------------


def tools_cpu_s(backend: Proc) -> float:
    """CPU seconds of the finished load-generator runs (our waited-for children) and the backend."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + tree_cpu_s(backend.pid)


def headroom_check(cpu_s: float, wall_s: float, *, what: str) -> bool:
    """Print whether the tools used at most 1/1.5 of their core in a direct run.

    At a fixed offered load (a rate, a number of streams) the tools do not
    saturate by design; what shows they outrun the proxy is spare capacity:
    at most 67% of their core busy means they could drive 1.5x the load.
    """
    share = cpu_s / wall_s
    ok = share <= 1 / 1.5
    print(
        f"tools outrun the activator ({what}): load generator + backend used {share:.0%} of "
        f"their core directly, room for {1 / max(share, 1e-9):.1f}x (need >= 1.5x): "
        f"{'OK' if ok else 'NOT MET'}"
    )
    return ok


def outrun_check(direct: float, proxied: float, *, what: str, higher_is_better: bool) -> bool:
    """Print whether the tools' direct figure is >= 1.5x the proxy's; True when it is."""
    ratio = direct / proxied if higher_is_better else proxied / direct
    ok = ratio >= 1.5
    print(
        f"tools outrun the activator ({what}): direct is {ratio:.2f}x the activator's "
        f"(need >= 1.5x): {'OK' if ok else 'NOT MET'}"
    )
    return ok


def verdict(label: str, ok: bool) -> bool:
    print(f"target {label}: {'MET' if ok else 'NOT MET'}")
    return ok
