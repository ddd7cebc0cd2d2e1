"""``kubectl apply -k deploy/`` against the emulated API server, as an operator would.

Covers:
- the whole of deploy/ (namespace, RBAC, Deployments, Services,
  NetworkPolicies, PodDisruptionBudgets) applies, and applies again
  unchanged;
- NetworkPolicy (networking.k8s.io/v1) and PodDisruptionBudget (policy/v1)
  are served like the other types: discovery and short names, get with
  kubectl's columns, strict
  schema validation of unknown fields, and the semantic checks a real API
  server makes (a PDB with both bounds, a negative one or a bad
  percentage; a NetworkPolicy's policy types, protocols and port range).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[6]

Kubectl = Any


def ok(result: Any) -> str:
    assert result.code == 0, result.err
    return str(result.out)


async def test_apply_k_deploy_succeeds_and_is_idempotent(kubectl: Kubectl) -> None:
    first = ok(await kubectl("apply", "-k", str(ROOT / "deploy")))
    assert "networkpolicy.networking.k8s.io/tidal-scaler created" in first
    assert "poddisruptionbudget.policy/tidal-activator created" in first
    again = ok(await kubectl("apply", "-k", str(ROOT / "deploy")))
    assert "created" not in again
    # A PDB's selector has the patch strategy "replace", so kubectl sends it
    # on every apply and says "configured", against a real API server too.
    changed = [line for line in again.splitlines() if not line.endswith(" unchanged")]
    assert all(line.startswith("poddisruptionbudget.policy/") for line in changed), again
    policies = ok(await kubectl("-n", "tidal-system", "get", "netpol", "-o", "name"))
    assert set(policies.split()) == {
        "networkpolicy.networking.k8s.io/tidal-activator",
        "networkpolicy.networking.k8s.io/tidal-scaler",
    }
    budgets = ok(await kubectl("-n", "tidal-system", "get", "pdb")).splitlines()
    assert budgets[0].split() == [
        "NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"
    ]  # fmt: skip
    scaler_budget = next(line.split() for line in budgets if line.startswith("tidal-scaler"))
    assert scaler_budget[1:3] == ["N/A", "1"]
    shown = ok(await kubectl("-n", "tidal-system", "get", "netpol", "tidal-scaler")).splitlines()
    assert shown[0].split() == ["NAME", "POD-SELECTOR", "AGE"]
    assert shown[1].split()[1] == "app.kubernetes.io/name=tidal-scaler"


PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: both, namespace: default}
spec:
  selector: {matchLabels: {app: x}}
  FIELD
"""


async def test_unknown_field_is_refused(kubectl: Kubectl) -> None:
    result = await kubectl("apply", "-f", "-", stdin=PDB.replace("FIELD", "maxUnavailble: 1"))
    assert result.code != 0
    assert "maxUnavailble" in result.err


@pytest.mark.parametrize(
    ("field", "words"),
    [
        ("minAvailable: 1\n  maxUnavailable: 1", "cannot be both set"),
        ("maxUnavailable: -1", "greater than or equal to 0"),
        ('maxUnavailable: "120%"', "integer or percentage"),
    ],
)
async def test_invalid_pdbs_are_refused(kubectl: Kubectl, field: str, words: str) -> None:
    result = await kubectl("apply", "-f", "-", stdin=PDB.replace("FIELD", field))
    assert result.code != 0
    assert words in result.err


NETPOL = """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: np, namespace: default}
spec:
  podSelector: {}
  policyTypes: [TYPE]
  ingress:
    - ports: [{protocol: PROTO, port: PORT}]
"""


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (("Ingress", "TCP", "8080"), ""),
        (("Sideways", "TCP", "8080"), 'Unsupported value: "Sideways"'),
        (("Ingress", "ICMP", "8080"), 'Unsupported value: "ICMP"'),
        (("Ingress", "TCP", "70000"), "between 1 and 65535"),
    ],
)
async def test_network_policies_are_validated(
    kubectl: Kubectl, values: tuple[str, str, str], words: str
) -> None:
    text = NETPOL
    for placeholder, value in zip(("TYPE", "PROTO", "PORT"), values, strict=True):
        text = text.replace(placeholder, value)
    result = await kubectl("apply", "-f", "-", stdin=text)
    if not words:
        assert result.code == 0, result.err
        return
    assert result.code != 0
    assert words in result.err
