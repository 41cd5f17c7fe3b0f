"""Where HiFi-RAG's files are: what the package ships, and where a run keeps its data.

Shipped with the package and read through ``importlib.resources``, so a checkout, an editable install
and an installed wheel read them alike: the prompts and the refine examples (``prompts/`` of the
repository) and the warehouse's SQL (``warehouse/views/`` and ``warehouse/examples.sql``). In the
repository, ``hifirag_core/assets`` links to those folders; a wheel holds copies.

Data lives under the data root: ``--data-root``, else ``$HIFIRAG_DATA_ROOT``, else ``warehouse/data``
when the code runs from a checkout, else the per-user data folder (``platformdirs``: on Linux
``~/.local/share/hifirag``). Prefect's home follows the same rule (``.prefect`` in a checkout, else
``prefect`` under the per-user folder), and so does the shared data (``../shared/data`` beside a checkout,
or ``$HIFIRAG_SHARED_DATA``).
"""

from __future__ import annotations

import os
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

_ASSETS = "hifirag_core.assets"
_SOURCE_TREE = Path(__file__).resolve().parent.parent


def checkout() -> Path | None:
    """The repository the code runs from, or None for an installed package."""
    is_checkout = (_SOURCE_TREE / "pyproject.toml").is_file() and (_SOURCE_TREE / "warehouse" / "views").is_dir()
    return _SOURCE_TREE if is_checkout else None


def asset(*parts: str) -> Traversable:
    """A file or folder the package ships (``asset("prompts", "draft.txt")``)."""
    node = files(_ASSETS)
    for part in parts:
        node = node.joinpath(part)
    return node


def prompts_folder() -> Traversable:
    return asset("prompts")


def views_folder() -> Traversable:
    return asset("views")


def user_data_dir() -> Path:
    """The per-user data folder of the platform, for installs outside a checkout."""
    from platformdirs import user_data_path

    return user_data_path("hifirag", appauthor=False)


def default_data_root() -> Path:
    """``warehouse/data`` in a checkout, else the per-user data folder."""
    root = checkout()
    return root / "warehouse" / "data" if root is not None else user_data_dir()


def data_root(explicit: str | Path | None = None) -> Path:
    """The flag, else ``$HIFIRAG_DATA_ROOT``, else the default above; always absolute."""
    return Path(explicit or os.environ.get("HIFIRAG_DATA_ROOT") or default_data_root()).resolve()


def default_prefect_home() -> Path:
    """Prefect's database and state: ``.prefect`` in a checkout, else under the per-user data folder."""
    root = checkout()
    return root / ".prefect" if root is not None else user_data_dir() / "prefect"


def shared_data_dir() -> Path:
    """The shared data sets: ``$HIFIRAG_SHARED_DATA``, else ``../shared/data`` beside the checkout (or the
    current folder, for an installed package)."""
    explicit = os.environ.get("HIFIRAG_SHARED_DATA")
    if explicit:
        return Path(explicit)
    base = checkout() or Path.cwd()
    return base.parent / "shared" / "data"
