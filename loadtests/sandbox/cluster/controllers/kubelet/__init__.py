"""The sandbox's kubelet: each scheduled pod run as a real fake model-server process.

One kubelet serves every node of the sandbox, and moves each pod's status as
the real one does (phase, conditions, container statuses, restarts,
readiness from probes, graceful deletion). Its parts, by job:

- :mod:`.dispatch`: the :class:`Kubelet`, a worker per pod bound to a node,
  the faults and the close;
- :mod:`.pod_worker`: one pod from its binding to its removal (address,
  devices, configuration, retried while it fails);
- :mod:`.server_specs`: what fake server a pod runs, from its annotations,
  its container and its owners;
- :mod:`.container_runs`: the main container's processes, their readiness
  and their restarts with back-off;
- :mod:`.probes`: readiness probes; :mod:`.termination`: a deletion and its
  grace period;
- :mod:`.pod_status`: the status and Events the API shows of a pod, and its
  final removal;
- :mod:`.settings`: back-off, probing and stopping times, where files go.

A pod of the Tidal image runs the real ``tidal`` command its spec names
(:mod:`loadtests.sandbox.cluster.controllers.tidal_pods`), so ``deploy/``
can be applied and rolled out here.
"""

from loadtests.sandbox.cluster.controllers.kubelet.dispatch import Kubelet
from loadtests.sandbox.cluster.controllers.kubelet.settings import KubeletSettings

__all__ = ["Kubelet", "KubeletSettings"]
