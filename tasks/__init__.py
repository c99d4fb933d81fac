"""Tasks: model pair + data + recipe + evaluation suite, at scales paper / regime / mini / tiny.

The names below are loaded on first use (PEP 562), so that `tasks.scales` (the scale names, which run.py's command
line needs before anything else) imports without torch."""
from tasks.scales import SCALES

__all__ = ["PAIRS", "Recipe", "SCALES", "Task", "get_task", "list_tasks", "make_task"]
_FROM = {"PAIRS": "tasks.registry", "get_task": "tasks.registry", "list_tasks": "tasks.registry",
         "make_task": "tasks.registry", "Recipe": "tasks.task", "Task": "tasks.task"}


def __getattr__(name: str):
    if name in _FROM:
        import importlib
        return getattr(importlib.import_module(_FROM[name]), name)
    raise AttributeError(f"module 'tasks' has no attribute {name!r}")
