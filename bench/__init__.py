"""Benchmarks: slow measurements kept out of `make test` (`make bench-*`)."""
