"""Sub-commands of the ``spark-stream-sched`` CLI; each module exposes ``register(subparsers)``."""
