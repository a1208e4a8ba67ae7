"""The 10-turn deposition review simulation and its generated scenario."""
