"""The sandbox: an emulated Kubernetes cluster and fake GPU model servers.

It lets the demo, the tests and the load tests run on one machine with no
cluster and no GPU, faithfully enough that real clients (kubectl, the
official Kubernetes clients, the OpenAI client) accept it unmodified.
"""
