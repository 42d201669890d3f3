"""Test configuration: hypothesis runs derandomised so every property test replays exactly."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "twin",
    derandomize=True,  # a fixed seed per test: a failure replays on every run
    deadline=None,  # machines are shared and noisy; speed is for benchmarks
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "twin"))
