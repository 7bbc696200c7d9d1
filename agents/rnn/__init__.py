"""RNN baseline: Mirhoseini et al. (ICML 2017) seq2seq LSTM placer with attention over op groups."""
from .agent import RNNAgent
from .policy import RNNPolicy

__all__ = ["RNNAgent", "RNNPolicy"]
