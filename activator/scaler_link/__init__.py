"""The activator's side of its conversation with the scaler.

- :mod:`activator.scaler_link.reporting`: stats every second, activations at
  once;
- :mod:`activator.scaler_link.peers`: every address of every scaler replica,
  so each one's windows stay warm;
- :mod:`activator.scaler_link.wake_queue`: targets to wake, from the gates
  to the reporter;
- :mod:`activator.scaler_link.wake_refusal`: the scaler's refusal to wake a
  target, and the answer its held requests get.
"""
