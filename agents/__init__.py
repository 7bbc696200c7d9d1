"""Placement agents. Each depends on `placement_gym`; `placement_gym` never imports them."""
