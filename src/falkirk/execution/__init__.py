"""The epoch pipeline: what the engine runs for each epoch, on Spark.

One epoch's computation and persistence (:mod:`.epoch`), the commit protocol and
garbage collection (:mod:`.commits`), the stages that run loops and sequence-number
regions (:mod:`.loop_stage`, :mod:`.sequence_stage`), interleaved loops' admission
(:mod:`.admission`), the run's explicit state (:mod:`.run_state`), the checks made
before a run (:mod:`.checks`, :mod:`.changes`), the edges' external actions
(:mod:`.edges`), driver pairs (:mod:`.pairing`), and what a run tells its user
(:mod:`.report`, :mod:`.description`, :mod:`.observer`).
"""
