"""The imitation placer: its training, the labels it imitates, its transfer to unseen graphs, its model cards."""
