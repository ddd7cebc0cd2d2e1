"""``tidal demo``: the end-to-end story of scale-from-zero, out and back.

- :mod:`~loadtests.demo.story` runs the story (the ``tidal demo`` subcommand);
- :mod:`~loadtests.demo.spot_story` runs ``tidal demo --story spot`` (a spot
  preemption under load), and :mod:`~loadtests.demo.spot_figures` holds its
  figures, verdict and table;
- :mod:`~loadtests.demo.warm_story` runs ``tidal demo --story warm`` (a wake
  from sleep beside a cold start);
- :mod:`~loadtests.demo.pool_story` runs ``tidal demo --story inferencepool``
  (an InferencePool woken from zero through its endpoint picker, scaled under
  load, with no activator);
- :mod:`~loadtests.demo.session` is what the stories share: the sandbox's
  directory, where the text and the JSON go, Ctrl-C, the exit code;
- :mod:`~loadtests.demo.client` sends one streaming chat completion and times it;
- :mod:`~loadtests.demo.activator_gauges` reads the held-request gauges from
  the activators' ``/metrics``;
- :mod:`~loadtests.demo.observe` turns the samples into the summary and verdict;
- :mod:`~loadtests.demo.view` renders the live status line and the summary table.
"""
