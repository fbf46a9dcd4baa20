"""Exporter."""
