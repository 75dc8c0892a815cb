"""What shows a run or a session: the stream grid, the Gantt, the server plots, the charts and
the results (its table, verdicts and roofline)."""
