"""Tidal's scaler: a Kubernetes controller that sizes GPU inference Deployments.

It watches opted-in Deployments, reads demand (activator reports, model-server
metrics, GPU metrics), decides how many replicas each needs with the pure
policy in :mod:`scaler.policy`, splits them between spot and on-demand
capacity, and patches the Deployments' scale.
"""
