"""Generate the reference pages in docs/ from the code that defines them.

``python -m scripts.generate_docs`` rewrites ``docs/annotations.md`` (from
the tables of keys both services read with,
:data:`groundwork.rules.scaling_keys.SCALING_KEYS` and
:data:`groundwork.rules.routing_keys.ROUTING_KEYS`) and
``docs/metrics.md`` (from the metrics each service registers, read back from
a fresh ``CollectorRegistry``) and ``docs/statuses.md`` (from the
activator's one table of its own answers, ``activator.statuses.ERROR_STATUS``).
``--check`` writes nothing and exits 1 when a page differs from what the
code says; a unit test runs the same comparison, so a knob, a metric or a
status cannot change without its page.

Each page is a module of :mod:`scripts.pages`, its prose divided into the
page's sections. Main decision: the pages are rendered from the live objects
(the parser's table, the registered collectors), never from a copy kept by
hand, and the tables' defaults are themselves checked against the parsers by
the tests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scripts.pages.annotations import annotations_page
from scripts.pages.metrics import metrics_page
from scripts.pages.statuses import statuses_page

__all__ = ["PAGES", "annotations_page", "main", "metrics_page", "statuses_page"]

ROOT = Path(__file__).resolve().parent.parent


#: Each generated page: its path under the repository root and its renderer.
PAGES = {
    "docs/annotations.md": annotations_page,
    "docs/metrics.md": metrics_page,
    "docs/statuses.md": statuses_page,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a page is out of date"
    )
    args = parser.parse_args(argv)
    stale = []
    for relative, render in PAGES.items():
        path = ROOT / relative
        text = render()
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(relative)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {relative}")
    if stale:
        print(
            "out of date: " + ", ".join(stale) + "; run: python -m scripts.generate_docs",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
