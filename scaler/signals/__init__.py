"""Where demand comes from: activator reports, pod scrapes, Prometheus queries.

Every source offers the one small interface of :mod:`~scaler.signals.base`
(its name, the signals it measures, a reading per target).
:mod:`~scaler.signals.hub` owns them: reports and refreshes go in, the
controller reads observations out; :mod:`~scaler.signals.combine` combines
their readings into signals from what each measures, never from which
source it is. :mod:`~scaler.signals.names` names the sources.
"""
