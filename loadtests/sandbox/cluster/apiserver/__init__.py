"""The emulated Kubernetes API server: HTTPS over the object store.

Real clients talk to it unmodified: ``kubectl`` 1.32, the official
``kubernetes`` client and kubernetes-asyncio, through a generated kubeconfig
(its own CA, a bearer token) or an in-cluster token directory. One module per
job:

- :mod:`.server`: :class:`ApiServer` (lifecycle, credentials, the audit
  log, the middleware), over :mod:`.listener` (HTTPS, closed by a fault)
  and :mod:`.fault_control` (the faults acted on, and ``/_sandbox/faults``);
- :mod:`.dispatch`: a request to its handler, with authentication and RBAC;
- :mod:`.routing`: which resource a path names and which verb a request is;
- :mod:`.endpoints`: ``/version`` (v1.32.x: kubectl's dispatcher picks its
  binary from it), ``/healthz``, ``/livez``, ``/readyz``, discovery
  (``cluster.discovery``), ``/openapi/v3`` (``cluster.openapi``), 404 for
  ``/openapi/v2``, which kubectl asks for in protobuf only;
- :mod:`.reads`: get and list (label and field selectors,
  ``limit``/``continue``), server-side Tables for ``kubectl get``
  (``cluster.tables``); answers are JSON even when protobuf is preferred, as
  kubectl accepts;
- :mod:`.watch`: watch (replay from a version, bookmarks, ``timeoutSeconds``,
  410 as an ``ERROR`` event);
- :mod:`.writes`: create (``generateName``, ``dryRun``) and update (409 on a
  stale version), with validation against the official schemas with
  ``fieldValidation`` (``cluster.validation``) and defaulting
  (``cluster.defaults``);
- :mod:`.patch`: the four patch types (``cluster.patching``);
- :mod:`.delete`: delete (propagation, grace period, preconditions) and
  deletecollection;
- :mod:`.scale`: the ``scale`` subresource (``status`` goes through update
  and patch);
- :mod:`.access_review`: ``SelfSubjectAccessReview`` for ``kubectl auth can-i``;
- :mod:`.pod_log`: ``pods/log`` for ``kubectl logs`` (``follow``,
  ``tailLines``), from the files the kubelet writes (``cluster.pod_logs``);
- :mod:`.port_forward`: ``pods/portforward`` for ``kubectl port-forward``
  (SPDY/3.1 in a WebSocket, ``cluster.spdy``);
- :mod:`.context`: what the handlers share, fixed once made, and
  ``events.k8s.io/v1`` Events over the core Events
  (``cluster.events_conversion``); :mod:`.open_watches`, the watch streams
  served now;
- :mod:`.wire`: JSON answers, ``Status`` errors, reading bodies (JSON, YAML,
  and the protobuf kubectl's typed ``create`` commands send: ``cluster.protobuf``).

Authentication is by bearer token (``cluster.auth``) and, when switched on,
RBAC (``cluster.rbac``); fault injection (``cluster.faults``) through
``make_unavailable``, ``slow_down``, ``cut_watches`` or the admin endpoint
``/_sandbox/faults``.

Composing it::

    server = ApiServer(store, certs_dir=tmp / "pki", rbac=True)
    await server.start()
    server.url                     # "https://127.0.0.1:<port>"
    server.ca_path                 # the CA clients trust
    server.admin_token             # system:masters
    token = server.mint_token("tidal", "tidal-scaler")     # a ServiceAccount's
    server.write_kubeconfig(tmp / "kubeconfig")            # admin unless token=
    env = server.write_in_cluster_dir(tmp / "sa", namespace="tidal",
                                      service_account="tidal-scaler")
    await server.make_unavailable(5.0)        # 503 for 5 s (refuse_connections=True: refused)
    server.slow_down(latency_s=0.2, duration_s=10.0)
    server.cut_watches(compact=True)          # watchers re-list after 410
    await server.stop()

Every write (POST, PUT, PATCH, DELETE; not the admin endpoint) is kept in
``server.audit``, a bounded audit log of :class:`AuditRecord` (time, user,
verb, path, status), as a real API server's audit log at level Metadata: the
way a test tells which client wrote what (two scalers, one leader).

The admin endpoint takes the admin token: ``GET /_sandbox/faults`` shows the
faults, ``POST`` with ``{"unavailable_s": 5, "refuse_connections": false,
"latency_s": 0.2, "slow_s": 10, "cut_watches": true, "compact": false}`` sets
them, ``DELETE`` lifts them.

Everything runs on the event loop of the store; no handler awaits between
reading and writing the store, so each request's read-modify-write is atomic.
"""

from loadtests.sandbox.cluster.apiserver.endpoints import SERVER_VERSION
from loadtests.sandbox.cluster.apiserver.server import ApiServer, AuditRecord

__all__ = ["SERVER_VERSION", "ApiServer", "AuditRecord"]
