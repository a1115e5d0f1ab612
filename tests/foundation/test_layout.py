"""Layout rules: labelq/ never imports celery; the exception tree is one tree."""

import ast
import inspect
from pathlib import Path

import labelq
from labelq import errors

ROOT = Path(labelq.__file__).parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_core_never_imports_celery():
    offenders = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                 if "celery" in imported_modules(p)]
    assert offenders == []


def test_every_error_derives_from_the_root_with_distinct_codes():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, Exception) and c.__module__ == errors.__name__]
    assert all(issubclass(c, errors.LabelqError) for c in classes)
    assert set(errors.__all__) == {c.__name__ for c in classes}
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes))


def test_file_format_error_carries_context():
    exc = errors.FileFormatError("t.csv", 12, "id", "missing value")
    assert str(exc) == "t.csv, line 12, field 'id': missing value"
    assert exc.to_dict() == {"code": "file_format", "message": str(exc), "path": "t.csv",
                             "line": 12, "field": "id"}
    assert exc.exit_code == 3 and exc.http_status == 422
