"""Growth methods behind one interface. Importing this package registers every method: it imports every module of
the package, so a file methods/<name>.py with a class decorated `@register_method("<name>")` is all a new method
needs (DESIGN.md §3). Modules that register nothing (base, registry, depth, width, ligo_operator) import as they
would anyway."""
import importlib
import pkgutil

from methods.base import Config, GrowthMethod, Stage
from methods.registry import METHODS, get_method, list_methods, refusal, register_method

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module.isidentifier():       # an editor's backup or a stray file is no module
        importlib.import_module(f"{__name__}.{_module}")
del _module

__all__ = ["Config", "GrowthMethod", "METHODS", "Stage", "get_method", "list_methods", "refusal", "register_method"]
