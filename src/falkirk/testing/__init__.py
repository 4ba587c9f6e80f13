"""What tests, benchmarks and demos check Falkirk with: one module per demo pipeline
(named after it) holding that pipeline's independent references - the output a
correct run must produce, computed in plain Python or by one plain Spark batch job -
and its input generators; :mod:`.verify`, the comparison of a whole output with a
reference; and :mod:`.services`, throw-away Redis and PostgreSQL servers.

The pipelines themselves are in :mod:`falkirk.demo` (``falkirk.demo.<x>.build_pipeline``).
The dependency goes one way: modules here import the demos' pipeline definitions
(the input and output contracts: schemas, headers, column names, the validation a
batch reference shares with its pipeline), and :mod:`falkirk.demo` imports nothing
from here, so a demo pipeline stays usable without its test fixtures. A reference
imports none of a pipeline's computation (sessions, joins, aggregates), only what
says what its input and output are: validation, parsing, row shapes. Nothing in the engine (``falkirk.time`` ... ``falkirk.runtime``,
``falkirk.ops``) imports this package or :mod:`falkirk.demo`; ``tests/test_layout.py``
checks both.
"""
