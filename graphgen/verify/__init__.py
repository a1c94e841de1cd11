"""Checking a file against HF `generate` (`graphgen verify`): token-level comparison and its report."""
