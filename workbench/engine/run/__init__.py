"""Running experiments: the runner, its process of its own for the window, and replay."""
