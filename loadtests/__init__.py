"""Load tests, benchmarks and the sandbox (emulated cluster and fake GPU servers)."""
