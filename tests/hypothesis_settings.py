"""Hypothesis settings the property tests share."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# A property over a function-scoped fixture (an instance, a server) whose examples each take
# a while: no deadline, the fixture shared by the examples on purpose, and no complaint that
# generating them is slow. A test adds its own `max_examples`: `@settings(OVER_FIXTURE, ...)`.
OVER_FIXTURE = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
