"""How a command built on the engine ends: its exit code and its last line.

Exit codes (docs/how-to/operating.md, exit codes): 0 when the run ended by itself or
:meth:`Engine.stop <falkirk.runtime.Engine.stop>` stopped it; 2 for a Falkirk error
(one line says what was seen and what to do); 128 + the signal's number when SIGINT
(130) or SIGTERM (143) stopped it, cleanly or abandoning the epochs in flight.
"""

from __future__ import annotations

import signal
import sys
import traceback

from falkirk.exceptions import FalkirkError
from falkirk.runtime.stopping import RunAbandoned


def exit_code(stopped_by: str | None) -> int:
    """A command's exit code for a run that ended because of ``stopped_by``: 0 when
    it ran to its end (None) or :meth:`Engine.stop` stopped it, else 128 + the
    signal's number, the shell's convention (130 for SIGINT, 143 for SIGTERM),
    whether the epochs in flight were committed (a clean stop) or abandoned."""
    if stopped_by is None or not stopped_by.startswith("SIG"):
        return 0
    return 128 + int(signal.Signals[stopped_by])


def failed(program: str, exc: FalkirkError | RunAbandoned, verbose: bool = False) -> int:
    """Print how ``program`` ended on ``exc`` - one line, and with ``verbose`` the whole
    trace, the JVM's included - and return its exit code."""
    if verbose:
        cause = getattr(exc, "cause", None)
        if cause is not None:  # an abandoned run's cancelled work
            traceback.print_exception(cause, file=sys.stderr)
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, RunAbandoned):
        print(f"{program}: {exc}", file=sys.stderr)
        return exit_code(exc.signal_name)
    print(f"{program}: error: {exc}", file=sys.stderr)
    return 2
