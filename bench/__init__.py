"""Benchmarks behind ``wizard-arena bench …``; figures go to BENCHMARKS.md."""
