"""Sending load and measuring it: the request client, workloads, prompts, the sampler and the
hardware fingerprint.
"""
