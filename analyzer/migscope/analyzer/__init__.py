"""Analyzer."""
