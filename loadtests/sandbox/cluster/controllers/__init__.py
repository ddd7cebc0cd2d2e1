"""The emulated control plane: controllers that run in-process on the store."""
