"""The simulator: worker models, synthetic task sets, replay of real data, experiment runner."""
