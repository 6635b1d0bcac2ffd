"""The README's Python session runs as written and prints what its comments say; the type stubs
name exactly what the module has."""

import ast
import contextlib
import io
import pathlib
import re

import pytest

import splitkv

REPO = pathlib.Path(__file__).resolve().parents[3]
README = REPO / "README.md"
STUBS = pathlib.Path(__file__).resolve().parents[1] / "python" / "splitkv" / "__init__.pyi"


def readme_session():
    text = README.read_text()
    section = text[text.index("## Using it from Python"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def expected_output(code):
    """Each print's expected line: a trailing `# ...` comment, or a comment line right after."""
    expected = []
    lines = code.splitlines()
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("print("):
            continue
        trailing = re.search(r"\)\s+# (.*)$", line)
        following = re.match(r"\s*# (.*)$", lines[i + 1]) if i + 1 < len(lines) else None
        expected.append(trailing.group(1) if trailing else following.group(1) if following else None)
    return expected


@pytest.mark.skipif(not README.exists(), reason="runs from a clone of the repository")
def test_readme_session_runs_as_written(tmp_path):
    code = readme_session().replace("/tmp/example-pydb", str(tmp_path / "example-pydb"))
    for _ in range(2):  # and again on the database the first run left
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
        printed = out.getvalue().splitlines()
        expected = expected_output(code)
        assert len(printed) == len(expected)
        for got, want in zip(printed, expected):
            if want is not None:
                assert got == want


def stub_classes():
    tree = ast.parse(STUBS.read_text())
    return {
        node.name: {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }


@pytest.mark.skipif(not STUBS.exists(), reason="runs from a clone of the repository")
def test_stubs_match_the_module():
    classes = stub_classes()
    assert set(classes) | {"OPTION_NAMES", "__version__"} == set(splitkv.__all__)
    for name, methods in classes.items():
        cls = getattr(splitkv, name)
        for method in methods:
            assert hasattr(cls, method), (name, method)
        public = {m for m in vars(cls) if not m.startswith("_")}
        assert public <= methods, (name, public - methods)
