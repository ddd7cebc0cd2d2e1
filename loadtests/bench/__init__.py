"""Benchmarks run by ``make bench``; each prints ratios against a reference
measured in the same run, since the machines they run on are shared and noisy."""
