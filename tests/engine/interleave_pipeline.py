"""Runs :mod:`falkirk.demo.halving` (a subprocess of the crash tests).

    python interleave_pipeline.py IN OUT STATE [MAX_IN_FLIGHT]
"""

from __future__ import annotations

import logging
import sys

from falkirk.demo.halving import build
from falkirk.runtime import Engine

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")  # tests read the loop's lines
    inp, out, state = sys.argv[1:4]
    in_flight = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    Engine(build(inp, out), state, max_in_flight=in_flight).run()
