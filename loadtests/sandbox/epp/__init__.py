"""A fake endpoint picker: the Inference Extension's EPP and its gateway, in one process.

Stands in for a Gateway (Envoy) with llm-d's router as its endpoint picker,
in front of an InferencePool of the sandbox (docs/gateway-api.md): clients
send requests to it; it holds them while the pool has no ready endpoint
(the router's flow control, its scale-from-zero waiting room), sends each to
the least-loaded endpoint once there is one, sheds what waited too long with
the router's answers, and publishes the router's metrics under their names.
One module per job:

- :mod:`.pool_view`: an InferencePool and its pods as endpoints (pure);
- :mod:`.pool_watch`: the pool and its pods, watched through the API server;
- :mod:`.waiting_room`: the flow-control rules: bands, flows, budgets (pure);
- :mod:`.picking`: which endpoint has room, and the pool's saturation (pure);
- :mod:`.flow_controller`: the one owner of held requests, endpoints and load;
- :mod:`.answers`: what a client gets when its request is dropped (one table);
- :mod:`.router_metrics`: the router's series, names and labels;
- :mod:`.gateway`: the HTTP side (the proxy, and ``/metrics``);
- :mod:`.service`: the parts wired into one EPP; :mod:`.cli`: ``tidal sandbox epp``.
"""
