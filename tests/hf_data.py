"""Hugging Face datasets made by the `datasets` library itself (its `imagefolder` builder, `save_to_disk`,
`to_parquet`), not by ddptrain, for the tests of the Hugging Face source."""

from __future__ import annotations

from pathlib import Path


def write_hf(folder: Path, out: Path, validation: float = 0.0) -> Path:
    """`folder` (class sub-folders) loaded with the imagefolder builder and saved with save_to_disk under `out`;
    with `validation`, the library's own train_test_split makes a `validation` split of that fraction."""
    import datasets

    datasets.disable_progress_bars()
    loaded = datasets.load_dataset("imagefolder", data_dir=str(folder))
    if validation:
        parts = loaded["train"].train_test_split(test_size=validation, seed=0, stratify_by_column="label")
        loaded = datasets.DatasetDict({"train": parts["train"], "validation": parts["test"]})
    loaded.save_to_disk(str(out))
    return out
