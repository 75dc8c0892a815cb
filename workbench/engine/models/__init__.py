"""Model files and what they take in memory: which file a model is, its GGUF header read in
bounded steps, a token estimate from its vocabulary, the GGUF files on this machine, and the
memory arithmetic (weights, KV cache per token and per slot layout) that the planner, the
predictor, the verdicts and the figures all use.
"""
