"""Model families on canonical weights. Importing this package registers every family."""
from models.canonical import Canonical
from models.family import FAMILIES, build_model, family_of, from_canonical, get_family, to_canonical
from models.spec import ModelSpec, check_growable
from models import bert, cait, gpt2, llama, vit  # noqa: F401  (importing registers every family)

__all__ = ["Canonical", "FAMILIES", "ModelSpec", "build_model", "check_growable", "family_of",
           "from_canonical", "get_family", "to_canonical"]
