"""Model families on canonical weights. Importing this package registers every family."""
from models.canonical import Canonical
from models.family import FAMILIES, build_model, family_of, from_canonical, get_family, to_canonical
from models.spec import ModelSpec, check_growable
from models import bert  # noqa: F401  (registers bert, roberta)

__all__ = ["Canonical", "FAMILIES", "ModelSpec", "build_model", "check_growable", "family_of",
           "from_canonical", "get_family", "to_canonical"]
