"""Watching a running server: what it does under the load its own users make, polled, never
loaded."""
