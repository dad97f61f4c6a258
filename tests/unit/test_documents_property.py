"""Property: any document yields a valid model or problems that name a field, never a crash."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mas.ctl.cli import main
from mas.infra.documents import read_yaml_file
from mas.infra.errors import ApplicationInvalid
from mas.infra.wiring import wire
from tests.conftest import EXAMPLES

EXAMPLE = read_yaml_file(EXAMPLES / "agency.yaml")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(
        [
            "use",
            "deploy",
            "use-and-deploy",
            "a2a",
            "local",
            "http://127.0.0.1:1",
            "http://h:1/p",
            "h:99999",
            "[::1",
            "http://[::1",
            "concierge",
            "ghost",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=12), inner, max_size=4),
    ),
    max_leaves=12,
)


def paths_of(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += paths_of(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += paths_of(value, (*prefix, index))
    return out


ALL_PATHS = [p for p in paths_of(EXAMPLE) if p]


@st.composite
def mutated_examples(draw: st.DrawFn) -> Any:
    """The example with a few of its fields replaced or removed."""
    doc = copy.deepcopy(EXAMPLE)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(ALL_PATHS))
        parent: Any = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            if draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(values)
        except (KeyError, IndexError, TypeError):
            continue
    return doc


def assert_valid_or_named(doc: Any) -> None:
    if not isinstance(doc, dict):
        return
    try:
        wire(doc)
    except ApplicationInvalid as exc:
        assert exc.problems, "an invalid document must list at least one problem"
        for problem in exc.problems:
            assert problem.path, f"problem without a field path: {problem}"
            assert problem.message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_examples())
def test_mutated_example_is_valid_or_names_a_field(doc: Any) -> None:
    assert_valid_or_named(doc)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["apiVersion", "kind", "metadata", "spec", "x"]), values))
def test_arbitrary_mapping_is_valid_or_names_a_field(doc: Any) -> None:
    assert_valid_or_named(doc)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=mutated_examples())
def test_validate_command_never_crashes(
    doc: Any, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path_factory.mktemp("doc") / "app.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = main(["validate", "-f", str(path)])
    err = capsys.readouterr().err
    assert code in (0, 1), err
    assert "internal error" not in err
    lines = err.rstrip("\n").split("\n") if err else []
    assert all(line.startswith("error: ") for line in lines), err
