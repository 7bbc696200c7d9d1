"""Fidelity: how well the simulator predicts real measurements, and how steady real measurements are."""
