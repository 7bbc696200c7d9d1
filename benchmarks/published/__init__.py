"""The field's published benchmarks (Tarnawski et al., DOPPLER) run through `placement-gym compare`."""
