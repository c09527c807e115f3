"""The table of formats (``commsim.interop.FORMATS``): every row's verbs round-trip on real data,
``commsim.save``/``commsim.load`` dispatch by its suffixes, the IR floor knows no format of it,
and the old names still work, with a DeprecationWarning."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import commsim
import commsim.cli.nccl_tests
from commsim import interop
from commsim._serialize import to_dict
from commsim.interop import FORMATS, VERBS, Format, NcclTestsLog

PACKAGE = Path(commsim.__file__).parent
LOGS = sorted((PACKAGE.parent / "examples" / "nccl-tests").glob("*.log"))
SCHEDULE = commsim.build("allreduce", "ring", nranks=4)
#: What a test gives a format's writer that cannot write without it.
REQUIRED = {"nbytes": 4096}
#: Formats that give back exactly the schedule written (MSCCL-IR may regroup its steps).
EXACT = {"json", "npz"}
ROWS = list(FORMATS.values())


def _data(row: Format) -> list:
    return (
        [SCHEDULE] if row.holds is commsim.Schedule else [interop.read_nccl_tests(p) for p in LOGS]
    )


def _options(row: Format) -> dict:
    return {option: REQUIRED[option] for option, _ in row.required}


def _assert_same(row: Format, a, b) -> None:
    """``b`` (read back) is what ``a`` (written) held, as far as ``row`` keeps it."""
    if isinstance(a, NcclTestsLog):
        keep = ("collective", "nranks", "hosts", "devices", "settings", "avg_busbw",
                "out_of_bounds", "time_column", "wrong_column")  # fmt: skip
        assert {k: getattr(b, k) for k in keep} == {k: getattr(a, k) for k in keep}
        assert [dataclasses.replace(r, line=0) for r in b.rows] == [
            dataclasses.replace(r, line=0) for r in a.rows
        ]
    elif row.name in EXACT:
        assert to_dict(b) == to_dict(a)
    else:  # a foreign schedule format: the same collective, still computed
        assert (b.collective, b.nranks, b.root) == (a.collective, a.nranks, a.root)
        commsim.verify(b)


def test_the_example_logs_are_there():
    assert len(LOGS) >= 2


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_format_then_parse_gives_the_data_back(row):
    if row.format is None or row.parse is None:
        assert row.why_not, f"{row.name}: a missing text verb needs its reason"
        return
    for data in _data(row):
        text = row.format(data, **_options(row))
        assert isinstance(text, str)
        _assert_same(row, data, row.parse(text))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_write_then_read_gives_the_data_back(row, tmp_path):
    for i, data in enumerate(_data(row)):
        path = tmp_path / f"data{i}{row.suffixes[0]}"
        assert row.write(data, path, **_options(row)) == path
        if row.format is not None:  # a text format writes exactly its text
            assert path.read_text() == row.format(data, **_options(row))
        if row.read is None:
            assert row.why_not, f"{row.name}: a format without a reader says why"
        else:
            _assert_same(row, data, row.read(path))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_each_verb_is_the_public_function_of_its_name(row):
    """``parse_X``/``format_X``/``read_X``/``write_X`` in ``commsim.interop`` are the row's
    verbs, and a verb the row lacks has no function."""
    stem = row.name.replace("-", "_")
    for verb in VERBS:
        if getattr(row, verb) is None:
            assert not hasattr(interop, f"{verb}_{stem}")
        else:
            assert getattr(interop, f"{verb}_{stem}") is getattr(row, verb)
            assert f"{verb}_{stem}" in interop.__all__
    assert row.verbs() == tuple(v for v in VERBS if getattr(row, v) is not None)


SCHEDULE_ROWS = [r for r in ROWS if r.holds is commsim.Schedule]


@pytest.mark.parametrize(
    ("row", "suffix"),
    [
        pytest.param(r, s, id=f"{r.name}{s}")
        for r in SCHEDULE_ROWS
        for s in (*r.suffixes, *(x.upper() for x in r.suffixes))
    ],
)
def test_save_and_load_dispatch_by_the_tables_suffixes(row, suffix, tmp_path):
    path = commsim.save(SCHEDULE, tmp_path / f"s{suffix}", **_options(row))
    assert interop.format_of(path) is row
    direct = row.write(SCHEDULE, tmp_path / f"direct{suffix}", **_options(row))
    if row.format is not None:
        assert path.read_text() == direct.read_text()
    if row.read is None:
        with pytest.raises(commsim.ScheduleError, match=row.why_not):
            commsim.load(path)
    else:
        _assert_same(row, SCHEDULE, commsim.load(path))
        _assert_same(row, row.read(direct), commsim.load(path))


@pytest.mark.parametrize("row", SCHEDULE_ROWS, ids=lambda r: r.name)
def test_save_with_a_format_name_overrides_the_suffix(row, tmp_path):
    path = commsim.save(SCHEDULE, tmp_path / "s.data", format=row.name, **_options(row))
    if row.format is not None:
        assert path.read_text() == row.format(SCHEDULE, **_options(row))
    else:
        assert to_dict(row.read(path)) == to_dict(SCHEDULE)


def test_any_other_suffix_is_json_and_logs_are_not_schedules(tmp_path):
    assert interop.format_of(tmp_path / "s.anything").name == interop.DEFAULT_SCHEDULE_FORMAT
    assert interop.format_of(tmp_path / "run.log").name == "json"  # load reads schedules only
    with pytest.raises(commsim.ParameterError, match="unknown schedule format 'nccl-tests'"):
        commsim.save(SCHEDULE, tmp_path / "s.log", format="nccl-tests")


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """Every import in ``path``, module-level and inside functions alike."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.module or "", [a.name for a in node.names]))
    return out


@pytest.mark.parametrize("module", ["_serialize", "_ir", "_collectives", "_messages"])
def test_the_ir_floor_imports_no_format(module):
    """The IR's own codec (``_serialize``) and the rest of the floor import nothing from
    ``commsim.interop``, not even lazily inside a function."""
    found = [
        (m, names)
        for m, names in _imports(PACKAGE / f"{module}.py")
        if m.startswith("commsim.interop") or (m == "commsim" and "interop" in names)
    ]
    assert found == []


def test_interop_sits_on_the_ir_floor():
    """``interop/`` imports the IR and below, never the layers above it."""
    floor = ("commsim._", "commsim.errors", "commsim.units", "commsim.interop")
    for path in sorted((PACKAGE / "interop").glob("*.py")):
        for module, names in _imports(path):
            targets = [f"commsim.{n}" for n in names] if module == "commsim" else [module]
            for target in targets:
                assert not target.startswith("commsim") or target.startswith(floor), (
                    f"{path.name} imports {target}"
                )


# -- the old names ------------------------------------------------------------------------------
def _old_writer_args() -> tuple[tuple, dict]:
    return ("allreduce", 4, [1024, 2048], [1e-5, 2e-5]), {"hosts": ["a", "a", "b", "b"]}


#: old name, its replacement (the same signature), a call of either.
OLD_NAMES = [
    ("to_msccl_xml", "format_msccl", lambda f: f(SCHEDULE)),
    ("export_msccl", "msccl_program", lambda f: f(SCHEDULE).xml),
    ("to_goal", "format_goal", lambda f: f(SCHEDULE, 64)),
    ("export_goal", "goal_program", lambda f: f(SCHEDULE, 64).text),
]


@pytest.mark.parametrize(("old", "new", "call"), OLD_NAMES, ids=[o for o, _, _ in OLD_NAMES])
def test_old_writer_names_warn_and_work(old, new, call):
    with pytest.warns(DeprecationWarning, match=f"use commsim.interop.{new}"):
        fn = getattr(interop, old)
    assert fn is getattr(interop, new)
    assert call(fn) == call(getattr(interop, new))
    assert old not in interop.__all__


def test_format_nccl_tests_log_warns_and_writes_what_it_wrote():
    """The old writer's text, saved from the code before the move (``tests/data``)."""
    args, kwargs = _old_writer_args()
    with pytest.warns(DeprecationWarning, match=r"format_nccl_tests\(NcclTestsLog.from_times"):
        old = interop.format_nccl_tests_log
    golden = Path(__file__).parent / "data" / "format_nccl_tests_log.golden"
    assert old(*args, **kwargs) == golden.read_text()


def test_default_algorithms_of_the_cli_warns():
    with pytest.warns(DeprecationWarning, match="commsim.algorithms.NCCL_ALGORITHMS"):
        old = commsim.cli.nccl_tests.DEFAULT_ALGORITHMS
    assert old is commsim.algorithms.NCCL_ALGORITHMS


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'to_gaol'"):
        interop.to_gaol  # noqa: B018
