"""The control plane: what the engine decides and records about epochs, without Spark.

The ledger plans each epoch's input and commits its metadata (:mod:`.ledger`), the
Ξ records say where each processor can roll back to (:mod:`.xi`), the time domains
map ticks to the graph's scopes (:mod:`.domains`), global-checkpoint barriers are
scheduled (:mod:`.barriers`), the files of forgotten records are collected
(:mod:`.garbage`) and named crash points are declared and reached (:mod:`.faults`).
Nothing here imports pyspark (a test checks it), so every module can be tested on
plain Python values.
"""
