"""What the routes share: :class:`Runtime`, kept on ``app.state.labelq``.

Its own module, below the routers: :mod:`.app` builds one and includes the routers, and the
routers (:mod:`.annotator`, :mod:`.operator`, :mod:`.auth`, :mod:`.fastpath`) read it, so
neither side imports the other (issue 43: the routers used to import it from ``app``, which
imports them; ``tests/foundation/test_import_graph.py`` checks each package has no cycle).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (annotations only)
    from sqlalchemy.engine import Engine

    from ..record.settings import Settings
    from ..service import Service
    from .auth import Annotator
    from .committer import Committer

__all__ = ["Runtime"]


@dataclass
class Runtime:
    """What the routes share (``app.state.labelq``)."""

    settings: Settings
    engine: Engine
    redis: Any
    service: Service
    send_task: Callable[[str, list[Any]], None]
    export_dir: Path
    # the submits' group commit (one thread, started by the first submit): the batches of
    # Service.submit_async, for the route and the hot path alike
    committer: Committer
    # signed-in annotators by token hash: (monotonic time, Annotator), kept
    # ``signin_max_age`` seconds (a pause or removal takes effect within that long, as in
    # the service's own worker cache)
    signins: dict[str, tuple[float, Annotator]] = field(default_factory=dict)
    signin_max_age: float = 1.0
