"""The emulated Kubernetes cluster: API server, object store and control plane.

``apiserver/`` serves the store over HTTPS to unmodified clients (one module
per job); beside it sit what it and the control plane share: the store,
resource tables, the official schemas, validation, defaulting, quantities,
selectors, authentication and RBAC; ``controllers/`` holds the control
plane's loops (scheduler, Deployments, ReplicaSets, EndpointSlices, the
kubelet); ``cluster`` composes them.
"""
