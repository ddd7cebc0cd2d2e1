"""When an idle model goes to zero: its grace period, set or learned, and keep-alive (pure).

- :mod:`scaler.policy.idle.keep_alive`: stay up or go to zero on expected
  cost (a cold start's misses against the GPU time of staying up), and the
  model's record of idle gaps it is judged on;
- :mod:`scaler.policy.idle.adaptive`: ``scale-to-zero-grace-period:
  adaptive``, a grace period (and a pre-wake for periodic models) learned
  from each model's idle times;
- :mod:`scaler.policy.idle.grace`: the decision with that learned grace
  period passed in.
"""
