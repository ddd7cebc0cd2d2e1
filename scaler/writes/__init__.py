"""The actuator's parts (:mod:`scaler.actuator`): what it writes from, what it keeps, what it says.

- :mod:`~scaler.writes.plan`: what a decision asks to be written for one
  target, and how far the writes got (pure);
- :mod:`~scaler.writes.status_records`: each target's status record, with
  the actuator its one owner;
- :mod:`~scaler.writes.failures`: each target's failed writes in a row, its
  backoff, and when its one ``WritesFailing`` Warning is due;
- :mod:`~scaler.writes.announcements`: the Events about its own writes (a
  scale changed, writes failing), through the Event sink it is given,
  fenced by the Lease.

Only the actuator holds them, and only it imports the write helpers (an
import contract).
"""
