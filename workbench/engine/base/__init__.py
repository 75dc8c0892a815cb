"""Foundations every layer shares: errors, the raw per-request record, the checks applied to
untrusted values, the servers' ``/metrics`` names (``server_kinds``) and the frozen app's data
folder (``bundle``).
"""
