"""The emulated Kubernetes cluster: API server, object store and control plane."""
