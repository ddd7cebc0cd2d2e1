"""``tidal status``: what Tidal is doing to each opted-in Deployment.

From the API server: desired and ready replicas, the spot/on-demand split,
mode and last reason (from the ``autoscaling.tidal.dev/status`` annotation,
which holds only discrete state). With ``--scaler-url`` it adds the live
values the scaler serves at ``GET /v1/targets`` (signals move every tick, so
they are never written to the API), and the cost rate and the saving against
all on-demand. The default table fits 100 columns (the name, the replicas,
mode and reasons, and live the concurrency); ``-o wide`` shows every column,
as kubectl's does, and ``-o json`` the same rows as JSON. ``--help`` says
what MODE and each reason mean.
A model with a TTFT objective (``autoscaling.tidal.dev/slo-ttft``) gets a
line under the table: the objective and, live, the capacity the scaler has
learned (prompt tokens per second per replica, or the prior it still uses)
and the attainment measured over the last ten minutes (the servers' TTFT
histograms), so the goal and what was delivered read side by side.
Where requests carry priority classes, a line under the table gives the
requests held by class across the activators and those shed in the last
report (docs/priority.md).
With the warm tier in use (``autoscaling.tidal.dev/sleep-after``), the live
view also shows how many replicas sleep, the wakes so far and the last wake's
duration.

Two reasons, said apart: REASON is why the scale *last changed* (from the
status annotation, written only at a change), LIVE-REASON what the scaler
says *now* (``GET /v1/targets``); they differ whenever the scaler holds a
scale for another reason than the one that set it. The table says so under
itself when it shows both.

A Deployment an opted-in InferencePool scales is listed too (POOL names the
pool), and a line per pool under the table says what it scales or why not
(:mod:`scaler.status.pools`).

A model with a spot placement policy is a pair of Deployments: the user's
(the on-demand share) and ``<name>-spot`` (the spot share). Its READY is the
pair's, and a line under the table names both halves with their ready
replicas (and, live, the cost), so the pair is obvious.

A model with GPU shapes (``placement.tidal.dev/shapes``, docs/shapes.md)
runs a companion ``<name>-<shape>`` per extra shape: its READY counts them
all, and a line under the table gives the replicas asked of each shape and
their hourly cost (from the status annotation), each Deployment's Ready
replicas and, live, the shapes capped because their pods stayed Pending.

Under the table, lines name what Tidal does not act on or cannot do:
Deployments left alone for an invalid annotation, routing annotations the
activator cannot use (it routes with the defaults), annotation keys of ours
that Tidal does not know (ignored, with the closest known key), a warm tier whose server
has no sleep mode, and Deployments whose opt-in label has a value other than
``true`` (``enabled: "yes"`` opts nothing in; it would otherwise be silent).
Output cut short by its reader (``tidal status | head``) ends quietly.

An unreachable scaler costs only the live columns: the table from the API
is still printed (with the error on stderr and exit status 1). A
``--scaler-url`` without a scheme is refused with the form to use.

The parts: :mod:`~scaler.status.command` (the command: its flags, what it
reads from the API server and the scaler), :mod:`~scaler.status.rows` (one
row per Deployment from what was read), :mod:`~scaler.status.table` (the
columns, narrow or wide, and the legends), :mod:`~scaler.status.notes` (the
lines under the table) and :mod:`~scaler.status.pools` (the InferencePools).
"""

from scaler.status.command import HELP_LEGEND, configure, run, scaler_url, write_out
from scaler.status.notes import devices_line, not_opted_in_lines
from scaler.status.rows import rows
from scaler.status.table import render_table

__all__ = [
    "HELP_LEGEND",
    "configure",
    "devices_line",
    "not_opted_in_lines",
    "render_table",
    "rows",
    "run",
    "scaler_url",
    "write_out",
]
