"""The operator's view of a pipeline: status and inspection of a storage root,
metrics, the live dashboard, and progress display."""
