"""What schemathesis checks of every answer, and the settings of the server it runs against:
shared by tests/http/test_schemathesis.py (the short run) and tools/schemathesis_run.py.
"""

from __future__ import annotations

from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# An event stream lives until its maximum age and schemathesis reads an answer to its end:
# short streams with frequent heartbeats keep such a case to 2 s instead of a silent wait.
STREAM_SETTINGS = "stream_max_age_s = 2\nstream_heartbeat_s = 1\n"
