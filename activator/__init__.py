"""Tidal's activator: the reverse proxy in front of every autoscaled model.

It holds requests while a model has no ready replica, asks the scaler to wake
it, forwards them the moment a replica is ready, and balances across replicas
once they are up.
"""
