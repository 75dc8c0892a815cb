"""Concurrency Workbench: measure and show how local LLM servers behave under concurrent load."""

__version__ = "0.1.0"
