"""The demo pipelines: the clickstream, orders, components, windowed-counts, Figure 1,
halving and Redis-to-PostgreSQL queries (``falkirk.demo.<x>.build_pipeline``, and what
defining each needs: schemas, CSV options, validation, policies), which
``examples/*.py`` run. Their references and input generators are in
:mod:`falkirk.testing`; nothing here imports it (see its docstring for why)."""
