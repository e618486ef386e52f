"""The Unsloth CPU environment (.venv-unsloth) is what requirements/unsloth-cpu.txt promises.

Run by `make test-unsloth`; the SFT tests that train through Unsloth live in tests/sft/.
"""

import importlib.metadata
import importlib.util

import pytest
from packaging.version import Version

pytestmark = pytest.mark.unsloth


def test_unsloth_imports_on_cpu_backend():
    import torch
    import unsloth  # noqa: F401  (must be imported before trl / transformers)

    assert not torch.cuda.is_available()
    from unsloth import FastLanguageModel

    assert FastLanguageModel is not None


def test_versions_are_inside_the_supported_window():
    version = importlib.metadata.version
    assert Version(version("unsloth")) >= Version("2026.10")  # as strings, "2026.9" would pass
    assert version("trl") == "1.15.0" and version("transformers") == "5.17.0"
    # PyPI's torchvision cannot load its operators beside a CPU torch and breaks `import unsloth`
    assert importlib.util.find_spec("torchvision") is None
