"""Foundations every layer shares: errors, the raw per-request record, validation of every
input and escaping of what is shown, the servers' ``/metrics`` names (``server_kinds``) and the
frozen app's data folder (``bundle``).
"""
