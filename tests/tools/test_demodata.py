import hashlib

from PIL import Image

from ddptrain.tools.demodata import dataset_is_complete, make_dataset


def _digest(root):
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*.jpg"))
    }


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = make_dataset(tmp_path / "a", classes=3, per_class=3, seed=7, progress=False)
    b = make_dataset(tmp_path / "b", classes=3, per_class=3, seed=7, progress=False)
    c = make_dataset(tmp_path / "c", classes=3, per_class=3, seed=8, progress=False)
    assert _digest(a) == _digest(b)
    assert set(_digest(a).values()).isdisjoint(_digest(c).values())
    assert dataset_is_complete(a, 3, 3, 7) and not dataset_is_complete(a, 3, 4, 7)


def test_photo_like_sizes(tmp_path):
    root = make_dataset(tmp_path, classes=2, per_class=6, seed=0, progress=False)
    sizes = [Image.open(p).size for p in root.rglob("*.jpg")]
    assert all(240 <= w <= 500 and 240 <= h <= 500 for w, h in sizes)
    assert len(set(sizes)) > 6  # varied sizes and aspect ratios


def test_make_dataset_help_names_every_class_it_can_write_in_order():
    from ddptrain.cli import build_parser
    from ddptrain.tools.demodata import CLASS_ORDER

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    classes = next(a for a in sub.choices["make-dataset"]._actions if a.dest == "classes")
    assert f"2-{len(CLASS_ORDER)}" in classes.help
    assert classes.help.endswith(", ".join(CLASS_ORDER))
