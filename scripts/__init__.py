"""Maintainer scripts: the reference pages generated from the code, the simulator tables."""
