"""Tasks: model pair + data + recipe + evaluation suite, at scales paper / mini / tiny."""
from tasks.registry import PAIRS, get_task, list_tasks, make_task
from tasks.task import SCALES, Recipe, Task

__all__ = ["PAIRS", "Recipe", "SCALES", "Task", "get_task", "list_tasks", "make_task"]
