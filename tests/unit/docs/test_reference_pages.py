"""The reference pages in docs/ against the code they describe.

Covers:
- docs/annotations.md and docs/metrics.md are exactly what
  ``python -m scripts.generate_docs`` renders from the code (so a knob or a
  metric cannot change without its page);
- each documented annotation default is the parser's default: the scaler's
  and the activator's parsers give the same result for the documented
  default as for no annotation at all, and a non-default value changes it;
- the documented keys are the keys the scaler's parser accepts;
- every documented metric is registered (the page lists the registry);
- every test and import contract docs/architecture.md names as holding a
  rule exists (a renamed test cannot leave the page pointing at nothing);
- every relative link in README.md and docs/*.md resolves inside the
  repository, and none points outside it (nor mentions ../shared, which a
  clone does not have).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from activator.kube.translate import target_from_deployment
from groundwork.rules.annotation_keys import Key
from groundwork.rules.pool_keys import POOL_KEYS
from groundwork.rules.routing_keys import ROUTING_KEYS
from groundwork.rules.scaling_keys import SCALING_KEYS
from scaler.policy import InvalidAnnotation, parse_scaling_config
from scaler.policy.annotations import KNOWN_KEYS
from scripts import generate_docs

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("page", sorted(generate_docs.PAGES))
def test_generated_page_matches_the_code(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    assert text == generate_docs.PAGES[page](), (
        f"{page} differs from the code; regenerate it with: python -m scripts.generate_docs"
    )


def test_check_mode_reports_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "docs").mkdir()
    for page, render in generate_docs.PAGES.items():
        (tmp_path / page).write_text(render(), encoding="utf-8")
    monkeypatch.setattr(generate_docs, "ROOT", tmp_path)
    assert generate_docs.main(["--check"]) == 0
    (tmp_path / "docs/metrics.md").write_text("# Metrics\n", encoding="utf-8")
    assert generate_docs.main(["--check"]) == 1


def test_every_error_code_is_a_counted_reason() -> None:
    """docs/statuses.md says the code is the rejections metric's reason: keep it true."""
    from activator.metrics import REASONS
    from activator.statuses import ERROR_STATUS

    assert {spec.code for spec in ERROR_STATUS.values()} <= set(REASONS)


def test_documented_keys_are_the_parsers_keys() -> None:
    assert tuple(key.name for key in (*SCALING_KEYS, *POOL_KEYS)) == KNOWN_KEYS
    assert len(set(KNOWN_KEYS)) == len(KNOWN_KEYS)


@pytest.mark.parametrize("spec", [s for s in SCALING_KEYS if s.default], ids=lambda s: s.name)
def test_scaler_documented_default_is_the_parsers_default(spec: Key[object]) -> None:
    key, default = spec.name, spec.default
    needs = _ALONGSIDE.get(key.split("/", 1)[1], {})
    assert parse_scaling_config({**needs, key: default}) == parse_scaling_config(needs)


# A value other than the default for each key, with what it needs alongside.
_OTHER_VALUES = {
    "min-scale": "1",
    "max-scale": "3",
    "initial-scale": "2",
    "engine": "triton",
    "target-concurrency": "8",
    "target-queue-depth": "4",
    "target-kv-cache-utilization": "80",
    "target-gpu-utilization": "70",
    "window": "30s",
    "panic-window-percentage": "20",
    "panic-threshold-percentage": "300",
    "scale-down-delay": "0s",
    "max-scale-up-rate": "4",
    "max-scale-down-rate": "3",
    "scale-to-zero-grace-period": "1m",
    "metrics-port": "9000",
    "on-demand-baseline": "0",
    "fallback": "none",
    "spot-overprovision": "1",
    "pending-timeout": "1m",
    "sleep-after": "30s",
    "sleep-level": "2",
    "slo-ttft": "2s",
    "slo-attainment": "95",
    "adapter-keep-alive": "30s",
    "slo-tpot": "50ms",
}

# Keys that are only valid beside another one.
_ALONGSIDE = {
    "slo-attainment": {"autoscaling.tidal.dev/slo-ttft": "2s"},
    "slo-tpot": {"autoscaling.tidal.dev/slo-ttft": "2s"},
}


@pytest.mark.parametrize(
    "spec", [s for s in SCALING_KEYS if not s.name.endswith("/policy")], ids=lambda s: s.name
)
def test_scaler_other_value_changes_the_config(spec: Key[object]) -> None:
    """The documented key is live: the parser reads it (a default that is ignored is no default)."""
    key = spec.name
    value = _OTHER_VALUES[key.split("/", 1)[1]]
    needs = _ALONGSIDE.get(key.split("/", 1)[1], {})
    assert parse_scaling_config({**needs, key: value}) != parse_scaling_config(needs)


def test_spot_placement_policies_are_documented_and_accepted() -> None:
    policy = next(s for s in SCALING_KEYS if s.name.endswith("/policy"))
    for value in ("spot", "spot-with-on-demand-baseline"):
        assert f"`{value}`" in policy.allowed
        assert parse_scaling_config({policy.name: value}).placement.policy == value
    with pytest.raises(InvalidAnnotation):
        parse_scaling_config({policy.name: "cheap"})


def _deployment(annotations: dict[str, str]) -> dict[str, object]:
    return {
        "metadata": {
            "namespace": "default",
            "name": "llama",
            "labels": {"autoscaling.tidal.dev/enabled": "true"},
            "annotations": annotations,
        }
    }


@pytest.mark.parametrize("spec", [s for s in ROUTING_KEYS if s.default], ids=lambda s: s.name)
def test_routing_documented_default_is_the_parsers_default(spec: Key[object]) -> None:
    with_default = target_from_deployment(_deployment({spec.name: spec.default}))
    assert with_default.problems == ()
    assert with_default == target_from_deployment(_deployment({}))


@pytest.mark.parametrize(
    ("suffix", "value"),
    [
        ("service", "other"),
        ("port", "http"),
        ("hosts", "llama.example.com"),
        ("path-prefix", "/llama"),
        ("models", "llama-3-8b"),
        ("cold-start-timeout", "1m"),
        ("max-buffered", "10"),
        ("container-concurrency", "4"),
        ("balancing", "prefix"),
        ("resend-unanswered", "false"),
    ],
)
def test_routing_documented_key_is_read(suffix: str, value: str) -> None:
    key = "routing.tidal.dev/" + suffix
    assert key in {s.name for s in ROUTING_KEYS}
    changed = target_from_deployment(_deployment({key: value}))
    assert changed.problems == ()
    assert changed != target_from_deployment(_deployment({}))


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: p.name)
def test_links_resolve_inside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "../shared" not in text, f"{path.name} points outside the repository"
    for target in _LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file_part = target.split("#", 1)[0]
        if not file_part:
            continue  # an anchor in the same page
        resolved = (path.parent / file_part).resolve()
        assert resolved.is_relative_to(ROOT), f"{path.name}: {target} leaves the repository"
        assert resolved.exists(), f"{path.name}: {target} does not exist"


_NAMED_TEST = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`|`::(\w+)`")
_NAMED_CONTRACT = re.compile(r'the import contract "([^"]+)"')


def test_what_the_architecture_names_as_holding_a_rule_exists() -> None:
    text = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    last_file: Path | None = None
    named = 0
    for match in _NAMED_TEST.finditer(text):
        path, test, same_file_test = match.groups()
        if path is not None:
            last_file = ROOT / path
            assert last_file.exists(), f"docs/architecture.md names {path}, which does not exist"
        name = test or same_file_test
        if name is not None:
            assert last_file is not None
            assert f"def {name}(" in last_file.read_text(), f"no {name} in {last_file}"
            named += 1
    assert named >= 10, "the rules of the scaler's sections name the tests that hold them"
    contracts = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for contract in _NAMED_CONTRACT.findall(text):
        assert f'name = "{contract}' in contracts, f"no import contract named {contract!r}"
