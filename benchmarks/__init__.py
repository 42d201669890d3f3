"""The benchmarks: one script per measured figure (``python -m twin.benchmarks.<name>``)."""
