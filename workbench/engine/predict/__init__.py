"""Prediction: what a configuration would measure, from a calibration of this machine and a
model of llama-server's scheduling, before it runs."""
