"""/exec's answer made in one msgspec call (`result_answer`) is byte for byte the answer of
the general path (`json_response(result_body(...))`): non-finite DOUBLEs as null, TIMESTAMPs
as text, integers past 64 bits through the fallback encoder, a column list seen again; and
a statement's message (a write's answer), made in one call too."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.http.encode import json_response, result_answer, result_body

_VALUES = {
    "BIGINT": st.integers(-(2**70), 2**70),
    "DOUBLE": st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5),
    "STRING": st.text(max_size=8),
    "TIMESTAMP": st.integers(-(10**12), 253402300799999999),
    "BOOLEAN": st.booleans(),
    "OID": st.integers(0, 2**32),
}


@st.composite
def results(draw: st.DrawFn) -> Result:
    kinds = draw(st.lists(st.sampled_from(sorted(_VALUES)), max_size=4))
    columns = [Column(f"c{i}", kind) for i, kind in enumerate(kinds)]
    row = st.tuples(*(st.none() | _VALUES[kind] for kind in kinds))
    return query_result("SELECT ...", columns, draw(st.lists(row, max_size=4)))


@given(results())
def test_one_call_answer_is_the_general_answer(result: Result) -> None:
    for _ in range(2):  # the second time with the column list's JSON part kept
        made = result_answer(result, "SELECT ...")
        general = json_response(result_body(result, "SELECT ..."))
        assert made.body == general.body
        assert made.headers == general.headers and made.status == general.status


@given(
    query=st.text(max_size=20),
    message=st.none() | st.text(max_size=12),
    count=st.integers(0, 2**62),
)
def test_a_message_answer_is_the_general_answer(
    query: str, message: str | None, count: int
) -> None:
    result = Result(query=query, message=message, count=count)
    made = result_answer(result, query)
    general = json_response(result_body(result, query))
    assert made.body == general.body
    assert made.headers == general.headers and made.status == general.status


def test_a_script_takes_the_general_path() -> None:
    script = query_result("SELECT 1; SELECT 2", [Column("2", "INT")], [(2,)])
    script.statements = 2
    assert b'"statements":2' in result_answer(script, "SELECT 1; SELECT 2").body
    message = message_result("INSERT ...; INSERT ...", "INSERT 0 1", 1)
    message.statements = 2
    assert b'"statements":2' in result_answer(message, "INSERT ...; INSERT ...").body
