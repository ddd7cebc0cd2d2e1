"""Several workers' metrics (:func:`activator.metrics.merge_expositions`): the merge for
``--workers`` sums samples.
"""

from __future__ import annotations

from activator.metrics import merge_expositions


def test_metrics_merge_sums_workers() -> None:
    one = (
        "# HELP x_total things\n# TYPE x_total counter\n"
        'x_total{code="2xx"} 3.0\nx_created{code="2xx"} 1.7e9\n'
        "# HELP g held\n# TYPE g gauge\ng 2.0\n"
    )
    two = (
        '# HELP x_total things\n# TYPE x_total counter\nx_total{code="2xx"} 4.0\n'
        "# TYPE g gauge\ng 1.0\n"
    )
    merged = merge_expositions([one, two])
    assert 'x_total{code="2xx"} 7.0' in merged
    assert "g 3.0" in merged
    assert "created" not in merged
