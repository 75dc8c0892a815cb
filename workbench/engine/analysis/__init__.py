"""Questions asked of stored sessions: comparison, library, roofline, SLOs, exports, verdicts,
capacity planning.
"""
