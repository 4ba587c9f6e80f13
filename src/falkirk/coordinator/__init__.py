"""Recovery: every path by which a running pipeline returns to a consistent state.

A restart on a root with committed work, a processor's partial failure, an executor
lost while epochs are in flight, and a run ended by a lost executor outside an
epoch's computation are all decided here (:mod:`.rollback` undoes and restores,
:mod:`.losses` decides what an executor loss failed). The solver that picks the
frontiers is pure Python (:mod:`falkirk.recovery`).
"""
