"""Where demand comes from: activator reports, pod scrapes, Prometheus queries.

Every source offers the one small interface of :mod:`~scaler.signals.base`
(its name, the signals it measures, a typed reading per target).
:mod:`~scaler.signals.hub` owns them without knowing which is which: arrivals
go in, the reconcilers read observations out; :mod:`~scaler.signals.combine`
combines their readings by what each measures, never by which source it is.
A polled source is registered by its settings group
(:mod:`~scaler.signals.registry`); the activators' reports arrive at the
scaler's HTTP API. :mod:`~scaler.signals.prometheus_query` is the scaler's
one Prometheus client.
"""
