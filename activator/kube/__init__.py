"""Discovery watches for the activator: opted-in Deployments and EndpointSlices."""
