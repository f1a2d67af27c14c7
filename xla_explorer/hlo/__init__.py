"""The IR (modules, computations, instructions) and HLO text in and out."""
