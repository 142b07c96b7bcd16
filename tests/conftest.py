"""Settings every test shares: Hypothesis without its wall-clock checks.

Hypothesis fails a property test whose one example runs longer than its deadline (200 ms by
default), or whose first examples take more than a second to generate (the `too_slow`
health check). Both are timed assertions: on a loaded machine a test process is taken off
the processor for that long while its code does nothing slow, and the test fails once and
passes alone (`test_row_bytes` did, at a load of 20). The project bounds performance with
benchmark scripts, never with timings in tests, so the default profile drops both. A test
that passes its own `suppress_health_check` list replaces this one's: it names `too_slow`
itself where its examples are slow to generate.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("untimed", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("untimed")
