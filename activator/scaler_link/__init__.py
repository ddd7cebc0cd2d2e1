"""The activator's side of its conversation with the scaler.

- :mod:`activator.scaler_link.reporting`: stats every second, activations at
  once;
- :mod:`activator.scaler_link.peers`: every address of every scaler replica,
  so each one's windows stay warm.
"""
