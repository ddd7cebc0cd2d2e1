"""The steps of one target's scaling decision, each a small pure function.

:func:`scaler.policy.decide.decide` reads as the numbered list in its
module's docstring; each step lives here with the rule it keeps:

- :mod:`~scaler.policy.steps.per_signal`: step 1, what each signal asks for;
- :mod:`~scaler.policy.steps.rates`: step 2, Knative's rate limits;
- :mod:`~scaler.policy.steps.panic`: step 3, panic mode;
- :mod:`~scaler.policy.steps.zero`: the idle clock, waking from zero and
  going to it;
- :mod:`~scaler.policy.steps.holds`: steps 4-6, what keeps the scale from
  falling (the no-data floor, the scale-down delay) and the bounds;
- :mod:`~scaler.policy.steps.explain`: the decision's reason and message;
- :mod:`~scaler.policy.steps.outcome`: what the step that ended the
  decision hands back, turned into the decision and the next state;
- :mod:`~scaler.policy.steps.rounding`: the one rounding rule the replica
  counts share.
"""
