"""The named statements of store/sql/: the shipped files load, every call names one of them, and a
file that breaks the loader's rules fails to load with its file and line named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from retrod.store.queries import SqlFileError, _all, load, parse

REPO = Path(__file__).resolve().parents[1]
CALL = re.compile(r"""\bq\(\s*["'](\w+)["']""")


def write(folder: Path, **files: str) -> Path:
    for name, text in files.items():
        (folder / f"{name}.sql").write_text(text, encoding="utf-8")
    return folder


def test_a_file_parses_into_named_statements_with_their_descriptions() -> None:
    text = ("-- The file's head: what it holds.\n"
            "--\n"
            "-- (more of the head)\n"
            "\n"
            "-- name: report_one\n"
            "-- The first: its description, under its name.\n"
            "-- %(member)s: named here, never sent.\n"
            "SELECT 1\n"
            "-- a comment inside the SQL stays\n"
            "FROM t;\n"
            "\n"
            "\n"
            "-- name: report_two\n"
            "SELECT 2;\n")
    one, two = parse(text, "report.sql")
    assert (one.name, one.where) == ("report_one", "report.sql:5")
    assert one.description == "The first: its description, under its name.\n%(member)s: named here, never sent."
    assert one.sql == "SELECT 1\n-- a comment inside the SQL stays\nFROM t;"
    assert (two.name, two.description, two.sql, two.where) == ("report_two", "", "SELECT 2;", "report.sql:13")


def test_an_include_is_replaced_by_the_fragment(tmp_path: Path) -> None:
    loaded = load(write(tmp_path, report="-- name: report_part\n-- A fragment.\nSELECT 1 AS x\n\n"
                                         "-- name: report_whole\nSELECT x FROM (\n    -- include: report_part\n) p;\n"))
    assert loaded["report_whole"] == "SELECT x FROM (\nSELECT 1 AS x\n) p;"


@pytest.mark.parametrize(("files", "message"), [
    ({"report": "-- name: report_a\nSELECT 1;\n", "ui": "-- name: ui_a\nSELECT 1;\n\n-- name: report_a\nSELECT 2;\n"},
     r"ui\.sql:4: statement report_a must be named ui_…"),
    ({"report": "-- name: report_a\nSELECT 1;\n\n-- name: report_b\nSELECT 2;\n\n-- name: report_a\nSELECT 3;\n"},
     r"report\.sql:7: statement report_a is defined twice \(first at report\.sql:1\)"),
    ({"report": "-- name: a\nSELECT 1;\n"}, r"report\.sql:1: statement a must be named report_…"),
    ({"report": "-- name: reports_a\nSELECT 1;\n"}, r"report\.sql:1: statement reports_a must be named report_…"),
    ({"report": "-- The head.\n\nSELECT 1;\n\n-- name: report_a\nSELECT 2;\n"},
     r"report\.sql:3: SQL with no `-- name:` line above it"),
    ({"report": "-- name: report_a\nSELECT 1 FROM (\n    -- include: report_nothing\n) x;\n"},
     r"report\.sql:1: statement report_a includes 'report_nothing', which no `-- name:` line defines"),
    ({"report": "-- name: report_a\nSELECT 1;\n\n-- The description of report_b, above its name.\n"
                "-- name: report_b\nSELECT 2;\n"},
     r"report\.sql:1: statement report_a ends with a comment: a description goes under"),
    ({"report": "-- name: report_a\n-- Only a description.\n\n-- name: report_b\nSELECT 2;\n"},
     r"report\.sql:1: statement report_a has no SQL"),
    ({"report": "-- name: report-a\nSELECT 1;\n"}, r"report\.sql:1: 'report-a' is no statement name"),
    ({"report": "-- name: report_a\nSELECT 1 FROM (\n    -- include: report_a\n) x;\n"},
     r"report\.sql:1: statement report_a includes itself"),
])
def test_a_file_that_breaks_a_rule_fails_to_load_naming_its_place(tmp_path: Path, files: dict[str, str],
                                                                   message: str) -> None:
    with pytest.raises(SqlFileError, match=message):
        load(write(tmp_path, **files))


def test_the_shipped_files_load_each_name_once_prefixed_by_its_file() -> None:
    statements = _all()  # (raises on a rule broken)
    stems = {path.stem for path in (REPO / "daemon" / "retrod" / "store" / "sql").glob("*.sql")}
    assert {name.split("_")[0] for name in statements} == stems
    assert not list((REPO / "daemon" / "retrod" / "store").glob("*.sql"))  # all in sql/


def test_every_call_names_a_shipped_statement() -> None:
    """A statement renamed, or a call written with an old name, fails here rather than when run."""
    statements = _all()
    unknown = [f"{path.relative_to(REPO)}: {name}"
               for top in ("daemon", "tests") for path in sorted((REPO / top).rglob("*.py"))
               for name in CALL.findall(path.read_text(encoding="utf-8"))
               if name not in statements and path.name != "test_queries.py"]
    assert unknown == []


def test_no_comment_in_a_statement_holds_a_placeholder() -> None:
    """psycopg reads `%(x)s` in a comment as a parameter too: one written in a statement's SQL (not
    in its description, which is never sent) makes it ask for a parameter it is never given."""
    found = [name for name, sql in _all().items()
             if any("%(" in line.split("--", 1)[1] for line in sql.splitlines() if "--" in line)]
    assert found == []
