"""Kubernetes access for the scaler (with activator.kube, the only importer of
kubernetes_asyncio)."""
