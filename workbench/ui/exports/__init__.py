"""What the window draws, written to files: the report, its charts and the Gantt (images and
the self-contained HTML page)."""
