"""The headless engine: servers, workloads, measurement, sessions and analysis.

It speaks plain Python (dataclasses and events) and never imports Qt, so the same code runs
under the CLI, the desktop window and the tests.
"""
