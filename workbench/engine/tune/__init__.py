"""Finding the settings that meet a latency SLO: the model ranks, real short runs verify."""
