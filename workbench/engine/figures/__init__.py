"""Figures derived from raw records: summaries, cross-checks and the metric catalogue. Pure
functions.
"""
