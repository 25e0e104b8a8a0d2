"""Pure input/output helpers (no pyspark): file-backed input streams for the Spark adapter."""
