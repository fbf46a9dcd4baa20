"""Simulated NVML."""
