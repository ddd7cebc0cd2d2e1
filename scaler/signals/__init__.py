"""Where demand comes from: activator reports, pod scrapes, Prometheus queries.

:mod:`~scaler.signals.hub` owns them: reports and refreshes go in, the
controller reads observations out. :mod:`~scaler.signals.names` names the
sources; :mod:`~scaler.signals.combine` combines their readings into signals.
"""
