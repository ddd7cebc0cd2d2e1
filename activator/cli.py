"""``tidal activator``: flags -> settings -> one process, or a supervisor of workers.

Every setting in :class:`~activator.settings.ActivatorSettings` gets a flag
(``--timeouts-connect-s``) whose help names its default, unit and
environment variable; ``--config FILE`` adds a YAML file under the
environment. Bad settings exit with status 2 and a message naming the key.

uvloop is installed here, at the entry point, through ``asyncio.Runner``'s
loop factory; tests drive :func:`activator.app.start` on the stdlib loop.
Serving itself (:func:`activator.app.serve`) and the worker supervisor
(:mod:`activator.workers`) live beside the wiring, so this module only
parses and dispatches, and nothing imports it back.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

import prometheus_client
import uvloop

from activator.app import serve
from activator.settings import ActivatorSettings
from activator.workers import run_workers
from groundwork.settings_loading import (
    SettingsError,
    add_setting_flags,
    flags_from_args,
    load_settings,
    visible_secret_warnings,
)

__all__ = ["configure", "run", "settings_from_args"]

log = logging.getLogger("activator")


def configure(parser: argparse.ArgumentParser) -> None:
    add_setting_flags(parser, ActivatorSettings)
    parser.epilog = (
        "Without --routes the activator discovers targets from Kubernetes "
        "(KUBECONFIG or in-cluster)."
    )


def settings_from_args(args: argparse.Namespace) -> ActivatorSettings:
    return load_settings(
        ActivatorSettings, flags=flags_from_args(args), config_file=getattr(args, "config", None)
    )


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except SettingsError as exc:
        for line in str(exc).splitlines():
            print(f"tidal activator: {line}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # The *_created series double every counter's series for a timestamp no
    # dashboard uses; the services are the only place that may say so
    # process-wide.
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
    for warning in visible_secret_warnings(ActivatorSettings, flags_from_args(args)):
        log.warning("%s", warning)
    if settings.workers > 1:
        return run_workers(settings)
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(serve(settings))
    except (ValueError, OSError) as exc:
        print(f"tidal activator: cannot start: {exc}", file=sys.stderr)
        return 1
