"""Arm health beside skill: whether an arm can run here, and what its errors say (never its skill)."""
