"""Every ``tidal`` subcommand's module imports and has what the CLI calls.

The composition root loads each subcommand through importlib, so neither
import-linter nor mypy sees those imports: a module renamed or moved would
drop its subcommand from ``tidal --help`` without a failure anywhere.

Covers: each of ``scaler.cli.SUBCOMMANDS`` exists, imports in a fresh
interpreter (the sandbox and the demo must not pull locust, and with it
gevent's monkey-patching, into the process), and provides ``configure`` and
``run``; ``configure`` adds its flags to a parser without error.
"""

from __future__ import annotations

import json
import subprocess
import sys

from scaler.cli import SUBCOMMANDS

CHECK = """
import argparse, importlib, json, sys
found = {}
for module in sys.argv[1:]:
    loaded = importlib.import_module(module)
    parser = argparse.ArgumentParser()
    loaded.configure(parser)
    found[module] = callable(loaded.run)
found["_gevent"] = any(m.split(".")[0] in ("locust", "gevent") for m in sys.modules)
print(json.dumps(found))
"""


def test_every_subcommand_module_imports_and_configures() -> None:
    modules = [sub.module for sub in SUBCOMMANDS]
    assert all(sub.available() for sub in SUBCOMMANDS), "a subcommand's module is missing"
    result = subprocess.run(
        [sys.executable, "-c", CHECK, *modules],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.splitlines()[-1])
    assert found.pop("_gevent") is False
    assert found == dict.fromkeys(modules, True)
