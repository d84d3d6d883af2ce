"""Intermediate representations. Nothing here imports from the rest of the package."""
