"""Performance: what a simulated or real env step costs, batching, big graphs, the Ray farm, the SB3 head."""
