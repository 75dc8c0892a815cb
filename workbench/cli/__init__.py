"""The headless front end: the same engine, with progress on the terminal."""
