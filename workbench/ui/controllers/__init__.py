"""The window's controllers: each a ``QObject`` that owns one concern (a run, a replay, the
hand-started server, the session library, the analyses of the current session, painting the
views) and talks to the window through signals. The window lays out the views, creates the
controllers and connects the two; nothing here builds a widget."""
