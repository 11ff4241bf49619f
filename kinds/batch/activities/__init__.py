"""Batch jobs: strict templates, item loading, and the activities that run items."""
