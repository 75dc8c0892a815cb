"""Foundations every layer shares: errors, the raw per-request record, and the checks applied to
untrusted values.
"""
