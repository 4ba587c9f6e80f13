"""The operator's view of a pipeline: status and inspection of a storage root, what a
failure would roll back (:mod:`.what_if`), metrics, the live dashboard, and progress
display."""
