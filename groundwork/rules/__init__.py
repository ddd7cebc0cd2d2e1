"""The rules both services and the simulator must agree on, each written once.

The activator and the scaler never import each other, yet they read the
same annotations, exchange one report and count prompts against the same
bounds; the simulator runs their logic and must read the same inputs. Kept
in each service, these rules drifted apart (``"0"`` was a duration to one
and a typo to the other). Here each is defined once and imported by every
reader:

- :mod:`~groundwork.rules.durations`: the duration grammar (Go's, a bare
  ``0`` included);
- :mod:`~groundwork.rules.priority`: a request's priority class, as the
  header, the default annotation and a trace say it;
- :mod:`~groundwork.rules.values` and :mod:`~groundwork.rules.annotation_keys`:
  the grammars of annotation values, a key, its problems and the reader
  both services read keys with;
- :mod:`~groundwork.rules.routing_keys`: every ``routing.tidal.dev/*`` key
  and the one reading of them (the activator routes by it, the scaler
  warns by it);
- :mod:`~groundwork.rules.scaling_keys`: every ``autoscaling.tidal.dev/*``
  and ``placement.tidal.dev/*`` key and its grammar;
- :mod:`~groundwork.rules.stats_report`: the ``POST /v1/stats`` report, as
  the activator writes it and the scaler reads it;
- :mod:`~groundwork.rules.prompt_sizes`: the prompt sizes at which arrivals
  are counted.

Main decision: pure, and a leaf. An import contract keeps this package
free of I/O, clocks and the event loop and of every other Tidal module, so
that ``scaler.policy`` and the activator's pure modules, which the
simulator runs in simulated time, may import it.
"""
