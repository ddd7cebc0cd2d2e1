"""Groundwork: what the activator and the scaler both stand on.

The two services never import each other (they talk over HTTP), yet both
reach the Kubernetes API, both read settings from flags, environment and a
file, and both read a bearer token from a mounted Secret. Written once per
service, those pieces drifted apart (two list-and-watch loops with different
backoff and error handling, three kubeconfig loaders). This package holds
the single copy, and both services (and the load tests) may import it:

- :mod:`groundwork.kube`: reaching the API server: the connection and
  kubeconfig loading (:mod:`~groundwork.kube.connection`), the
  list-then-watch loop (:mod:`~groundwork.kube.reflector`) and the error
  tree every Kubernetes call raises (:mod:`~groundwork.kube.errors`). With
  ``scaler.kube`` and ``activator.kube``, the only code that imports
  kubernetes_asyncio.
- :mod:`groundwork.settings_loading`: one loader for a service's settings
  (flags over environment over a YAML file over defaults) whose errors name
  the flag, variable or file key, the value and what is allowed.
- :mod:`groundwork.token_file`: reading a bearer token from a file.
- :mod:`groundwork.fair_hold_queue`: the order of held requests (class,
  then tenants in turns weighted by tokens; arrival order without either),
  with no clock and no event loop, that the activator's Gate holds with and
  the policy simulator runs in simulated time (it must hold exactly as the
  Gate does).
- :mod:`groundwork.rules`: the rules both services and the simulator must
  agree on, each written once (durations, priority, the annotations'
  grammar, the ``/v1/stats`` report, the prompt size bounds); pure, and a
  leaf, so that the scaler's pure policy may import it too.

Why this name, and not "common" or "utils": a package named for being
shared invites anything two modules happen to call. This one holds the
ground both services are built on (their connection to the cluster and
their configuration) and nothing that decides, serves or scales. It
imports neither ``scaler``, ``activator`` nor ``loadtests`` (an import
contract keeps it so), so it can never pull one service into the other.
"""
