"""Sessions on disk: the SQLite schema, the writer that records a run as it goes, and the reader."""
