"""The panels a user works in: the experiment form, the session library, the server, capacity
and SLO panels, the replay bar and the model and binary pickers."""
