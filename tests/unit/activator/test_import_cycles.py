"""The activator's modules import each other without a cycle.

Counted with grimp (import-linter's graph), which sees imports inside
functions and under ``TYPE_CHECKING`` too: a lazy import still ties two
modules together for a reader.
"""

from __future__ import annotations

import grimp


def test_no_import_cycle_in_the_activator() -> None:
    graph = grimp.build_graph("activator")
    cycles = sorted(
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if importer < imported and graph.chain_exists(importer=imported, imported=importer)
    )
    assert cycles == [], f"modules that import each other, directly or through others: {cycles}"
