"""Turn a headless locust run (plus sampled replicas) into a CSV and charts over time.

Inputs, from one run::

    locust -f loadtests/locustfile.py --headless --csv out/run --csv-full-history ...
    python -m loadtests.replicas_sampler ... --out out/replicas.csv   (alongside)

which leave ``out/run_stats.csv``, ``out/run_stats_history.csv`` (locust's),
``out/run_requests.csv`` (the locustfile's request log) and
``out/replicas.csv`` (with spot placement, one more sampler for the
``-spot`` companion: give ``--replicas`` once per file and the charts show
their sum). Output: ``out/run_report.csv`` (one row per bucket,
1 s unless the run is long), ``out/run_report.png`` (every chart, stacked on
one time axis), one PNG per chart (``out/run_<chart>.png``) and a summary
on stdout (``--json``: one JSON line)::

    python -m loadtests.report out/run --replicas out/replicas.csv

Main decision: latency percentiles come from the request log, not from
locust's stats history. Locust's history holds "current" percentiles over a
sliding window of about 10 s that is built from snapshots taken only when a
request completes: the first requests of a run, exactly those held through a
cold start, fall outside every window and never show. From the log, every
percentile is exact, and each latency is placed in the bucket where its
request *began*, so a cold start shows up where the load arrived rather than
minutes later when the answers came. Without a request log (a locustfile
of your own) the report falls back to locust's history and says less.

Columns:

- ``sent_per_s``, ``requests_per_s`` (completed), ``failures_per_s``:
  requests that began, ended, or failed in each bucket; ``TTFT``/``TPOT``
  rows, which the locustfile adds for each streamed request, are not
  requests and are left out;
- ``e2e_*_s``, ``ttft_*_s``, ``tpot_*_s``: percentiles of the requests that
  began in the bucket (successful ones);
- ``users``: locust's user count; ``desired``, ``ready``: the last replica
  sample by the end of the bucket.

The shaded bands on every chart are the stretches with no ready replica:
scale to zero, and the cold start that follows, where requests wait.
"""

from loadtests.report.charts import CHARTS, draw_chart, plot
from loadtests.report.cli import main, write_report
from loadtests.report.inputs import (
    ReplicaSample,
    ReportError,
    RequestRecord,
    combine_replicas,
    read_replicas,
    read_request_log,
    read_stats_history,
)
from loadtests.report.rows import MergedRow, auto_bucket_s, merge, percentile, write_csv
from loadtests.report.summary import Summary, summarize

__all__ = [
    "CHARTS",
    "MergedRow",
    "ReplicaSample",
    "ReportError",
    "RequestRecord",
    "Summary",
    "auto_bucket_s",
    "combine_replicas",
    "draw_chart",
    "main",
    "merge",
    "percentile",
    "plot",
    "read_replicas",
    "read_request_log",
    "read_stats_history",
    "summarize",
    "write_csv",
    "write_report",
]
