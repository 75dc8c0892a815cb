"""What to run: experiment files, their settings and validation."""
