"""`ddptrain lint` follows the folders a program puts on sys.path before importing from them (`import _init_paths`),
as research repositories keeping their code in lib/ or src/ do."""

import json
import textwrap
from pathlib import Path

from ddptrain.tools.lint import run_lint
from ddptrain.tools.lint.program import Module
from ddptrain.tools.lint.syspath import path_additions

TRAIN = """
import _init_paths
import torch
import torch.distributed as dist
from utils.saver import save

if __name__ == "__main__":
    dist.init_process_group("gloo")
    save(model)
"""
SAVER = """
import torch

def save(model):
    torch.save(model.module.state_dict(), "last.pt")
"""
INIT_PATHS = {
    "a helper, as HRNet": """
        import os.path as osp
        import sys

        def add_path(path):
            if path not in sys.path:
                sys.path.insert(0, path)

        this_dir = osp.dirname(__file__)
        lib_path = osp.join(this_dir, '..', 'lib')
        add_path(lib_path)
        """,
    "pathlib": """
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
        """,
    "os.path.split's head, as awesome-semantic-segmentation": """
        import os, sys
        cur_path = os.path.abspath(os.path.dirname(__file__))
        root_path = os.path.split(cur_path)[0]
        sys.path.append(os.path.join(root_path, "lib"))
        """,
    "os.path calls": """
        import os, sys
        sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
        """,
}


def _repository(root: Path, init_paths: str) -> Path:
    (root / "tools").mkdir(parents=True)
    (root / "lib" / "utils").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / "tools" / "train.py").write_text(TRAIN)
    (root / "tools" / "_init_paths.py").write_text(textwrap.dedent(init_paths))
    (root / "lib" / "utils" / "saver.py").write_text(SAVER)
    return root / "tools" / "train.py"


def test_a_module_put_on_sys_path_by_init_paths_is_read_with_the_program(tmp_path, capsys):
    for index, (form, init_paths) in enumerate(INIT_PATHS.items()):
        script = _repository(tmp_path / str(index), init_paths)
        assert run_lint([str(script)], as_json=True) == 0, form
        report = json.loads(capsys.readouterr().out)
        assert [Path(p).name for p in report["programs"][0]] == ["train.py", "_init_paths.py", "saver.py"], form
        assert {(Path(f["file"]).name, f["rule"]) for f in report["findings"]} == {("saver.py", "DDP015")}, form


def test_only_paths_computed_from_the_file_are_followed(tmp_path):
    """A path relative to the current folder depends on where the program is started: not followed; neither is
    a name assigned in a function, nor a folder that does not exist."""
    (tmp_path / "lib").mkdir()
    module = Module(
        "x.py",
        textwrap.dedent(
            """
            import os, sys
            sys.path.insert(0, "../lib")
            sys.path.append(os.getcwd())
            sys.path.append(os.path.join(os.path.dirname(__file__), "missing"))
            def later():
                here = os.path.dirname(__file__)
                sys.path.append(here)
            sys.path.append(os.path.join(os.path.dirname(__file__), "lib"))
            """
        ),
        tmp_path / "x.py",
    )
    assert path_additions(module) == [tmp_path / "lib"]


def test_a_script_that_puts_its_parent_folder_on_sys_path_through_sys_path_0_is_read_with_that_folder(tmp_path, capsys):
    """`sys.path.append(os.path.dirname(sys.path[0]))` in tools/train.py: run as the program, Python's sys.path[0] is
    the script's folder, so the repository's root packages are imported. In a module without a `__main__` block
    sys.path[0] is whatever script imported it: not followed."""
    script = _repository(tmp_path, "")
    script.write_text(
        "import os, sys\nsys.path.append(os.path.join(os.path.dirname(sys.path[0]), 'lib'))\n"
        + TRAIN.replace("import _init_paths\n", "")
    )
    assert run_lint([str(script)], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in report["programs"][0]] == ["train.py", "saver.py"]
    assert [(Path(f["file"]).name, f["rule"]) for f in report["findings"]] == [("saver.py", "DDP015")]
    module = Module("helper.py", "import os, sys\nsys.path.append(os.path.dirname(sys.path[0]))\n", script)
    assert path_additions(module) == []
