"""Imports verl (installed without its dependencies, scripts/python-requirements.txt) for the
reference scripts beside this file: the packages verl imports at module level that its
algorithms never call (ray, tensordict, omegaconf, ...) are stubbed, so only torch and numpy
do real work. `import verl_stubs` before anything from verl.
"""
import importlib.abc
import importlib.machinery
import sys
from unittest import mock

STUBBED = {"ray", "tensordict", "omegaconf", "hydra", "codetiming", "wandb", "orjson", "datasets", "peft",
           "torchdata", "pylatexenc", "math_verify", "dill", "psutil", "pandas", "cachetools", "torchvision",
           "accelerate", "liger_kernel", "flash_attn", "vllm", "sglang", "pybind11"}


class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = mock.MagicMock(name=spec.name)
        module.__path__ = []
        module.__spec__ = spec
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, StubFinder())


class Config(dict):
    """What verl's estimators read from AlgoConfig: .get(key, default) and attributes."""

    def __getattr__(self, key):
        return self[key]
