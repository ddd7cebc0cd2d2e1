"""What the actuator (:mod:`scaler.actuator`) writes from, and what it keeps of its writes.

- :mod:`~scaler.writes.plan`: what a decision asks to be written for one
  target, and how far the writes got (pure);
- :mod:`~scaler.writes.status_records`: each target's status record, with
  the actuator its one owner;
- :mod:`~scaler.writes.failures`: each target's failed writes in a row, its
  backoff, and when its one ``WritesFailing`` Warning is due.

None of these writes anything: only the actuator imports the write helpers
(an import contract).
"""
