"""A request from its target to the end of its answer: the steps, the answers, a client leaving.

- :mod:`~activator.forwarding.steps`: steps 3 to 5 of a request (take an
  endpoint, take a connection, send, end), written once for every request,
  and where each failure goes;
- :mod:`~activator.forwarding.answers`: every answer the activator makes
  itself, and the count of every request that ends (answered, relayed
  whole, or cut); :mod:`~activator.forwarding.refusal_log`, the log of them
  that never floods;
- :mod:`~activator.forwarding.leaving`: a client that leaves while its
  request is held or relayed: why its answer ends, and the grace an answer
  begun gets to end.

It is the one place that holds both sides of the data path at once: a
client's exchange (:mod:`activator.http1.exchange`) and a replica connection
(:mod:`activator.http1.upstream`), which never see each other but through
:mod:`activator.http1.relay`.
"""

from activator.forwarding.answers import SERVE_ERRORS, Answers
from activator.forwarding.steps import Forwarder, Forwarding, in_task

__all__ = ["SERVE_ERRORS", "Answers", "Forwarder", "Forwarding", "in_task"]
