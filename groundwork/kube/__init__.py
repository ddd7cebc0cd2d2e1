"""Reaching the Kubernetes API: connection, list-then-watch, errors (with
``scaler.kube`` and ``activator.kube``, the only importers of kubernetes_asyncio)."""
