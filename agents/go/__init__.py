"""GO (Zhou et al., NeurIPS 2020): a placer trained over many graphs that places a new one zero-shot or after a
few measured placements (GraphSAGE encoder, segment-recurrent attention, device head, PPO)."""
from .agent import GOAgent, GOPolicySettings, GOSettings
from .policy import GOPolicy, SegmentRecurrentAttention

__all__ = ["GOAgent", "GOPolicy", "GOPolicySettings", "GOSettings", "SegmentRecurrentAttention"]
