"""Growth methods behind one interface. Importing this package registers every method."""
from methods.base import Config, GrowthMethod, Stage
from methods.registry import METHODS, get_method, list_methods, register_method
from methods import scratch  # noqa: F401  (one import per method file registers it)
from methods import stackbert, interpolation, net2net, bert2bert, direct_copy, ligo, mslt, ki  # noqa: F401
from methods import hypercloning, g_stack, lemon, msg, ligo_copy  # noqa: F401

__all__ = ["Config", "GrowthMethod", "METHODS", "Stage", "get_method", "list_methods", "register_method"]
