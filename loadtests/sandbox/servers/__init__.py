"""Fake GPU model servers: vLLM-like (OpenAI API), Triton-like (KServe v2), DCGM-like."""
