"""The replicas sampler's pure parts (loadtests.replicas_sampler).

Covers:
- sample() writes a header and one row per poll, a failed poll as a row with
  the error and no counts, and one last poll once stopped;
- load_kubeconfig: server, namespace, token, tokenFile, CA data (a real
  certificate), plain http; exec plugins and a missing context are refused
  with a message that says what to do.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import datetime
import io
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from loadtests.replicas_sampler import (
    CSV_COLUMNS,
    ReplicaReadError,
    ReplicaReading,
    load_kubeconfig,
    sample,
)


class ScriptedReader:
    """Answers from a script; sets ``stop`` when the script runs out."""

    def __init__(self, script: list[ReplicaReading | str], stop: asyncio.Event) -> None:
        self.script = list(script)
        self.stop = stop
        self.calls = 0

    async def read(self) -> ReplicaReading:
        self.calls += 1
        step = self.script.pop(0) if self.script else ReplicaReading(9, 9)
        if not self.script:
            self.stop.set()
        if isinstance(step, str):
            raise ReplicaReadError(step)
        return step


async def test_sample_writes_one_row_per_poll_and_a_last_one() -> None:
    stop = asyncio.Event()
    script: list[ReplicaReading | str] = [ReplicaReading(0, 0), "HTTP 503", ReplicaReading(2, 1)]
    reader = ScriptedReader(script, stop)
    out = io.StringIO()
    clock = iter(float(t) for t in range(100, 200))
    rows = await sample(reader, out, interval_s=0.001, stop=stop, wall_clock=lambda: next(clock))
    lines = list(csv.reader(io.StringIO(out.getvalue())))
    assert lines[0] == list(CSV_COLUMNS)
    assert lines[1:4] == [
        ["100.000", "0", "0", ""],
        ["101.000", "", "", "HTTP 503"],
        ["102.000", "2", "1", ""],
    ]
    assert rows == 4  # the script's three, then one after stop was set
    assert lines[4] == ["103.000", "9", "9", ""]


async def test_sample_refuses_a_bad_interval() -> None:
    with pytest.raises(ValueError, match="interval"):
        await sample(ScriptedReader([], asyncio.Event()), io.StringIO(), interval_s=0,
                     stop=asyncio.Event())  # fmt: skip


def self_signed_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def kubeconfig(tmp_path: Path, cluster: str, user: str, context_extra: str = "") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"contexts: [{{name: c, context: {{cluster: k, user: u{context_extra}}}}}]\n"
        f"clusters: [{{name: k, cluster: {cluster}}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
    )
    return path


def test_kubeconfig_with_ca_data_token_and_namespace(tmp_path: Path) -> None:
    ca = base64.b64encode(self_signed_pem()).decode()
    path = kubeconfig(
        tmp_path,
        f'{{server: "https://127.0.0.9:6443/", certificate-authority-data: "{ca}"}}',
        "{token: s3cret}",
        ", namespace: models",
    )
    access = load_kubeconfig(path)
    assert access.server == "https://127.0.0.9:6443"
    assert access.token == "s3cret"
    assert access.namespace == "models"
    assert access.ssl_context is not None
    assert len(access.ssl_context.get_ca_certs()) == 1


def test_kubeconfig_plain_http_with_token_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    access = load_kubeconfig(
        kubeconfig(tmp_path, '{server: "http://127.0.0.1:8001"}', "{tokenFile: token}")
    )
    assert (access.ssl_context, access.token, access.namespace) == (None, "from-file", "default")


@pytest.mark.parametrize(
    ("cluster", "user", "message"),
    [
        pytest.param('{server: "https://x"}', "{exec: {command: aws}}", "exec", id="exec"),
        pytest.param('{server: "x:6443"}', "{token: t}", "not an http", id="bad-server"),
    ],
)
def test_kubeconfig_refusals(tmp_path: Path, cluster: str, user: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_kubeconfig(kubeconfig(tmp_path, cluster, user))


def test_kubeconfig_unknown_context(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, '{server: "http://x"}', "{token: t}")
    with pytest.raises(ValueError, match="no context named 'other'"):
        load_kubeconfig(path, context="other")
