"""Who runs a blobstate task, read inside the task: the executor, Spark's attempt ids, the partition.

The executor is what placement needs to learn where a partition's copy is (``blobstate.spark.placement``): the JVM
helper ``blobstate.spark.PlacedRDD`` (``spark/placement/jvm/``) sets it in the task's local properties, since a
Python task cannot ask Spark for its executor id. Spark's ``task_attempt_id`` is unique within a SparkContext and
goes into every part a task stages, so a retried or speculative attempt's part is told apart from the one the
driver commits.
"""

from __future__ import annotations

from dataclasses import dataclass

EXECUTOR_PROPERTY = "blobstate.executor"  # the local properties the JVM helper sets in a task (PlacedRDD.java)
STAGE_ATTEMPT_PROPERTY = "blobstate.stageAttempt"


@dataclass(frozen=True)
class TaskIdentity:
    """Who ran a task: ``executor`` (``executor_<host>_<id>``; ``""`` when unknown: no helper, Spark Connect),
    Spark's ``task_attempt_id`` (unique within a SparkContext: a re-run stage's attempts get new ones), the task's
    ``attempt`` number (0 first; a re-run stage starts again at 0), ``stage_id`` and ``stage_attempt`` (-1 when
    unknown)."""

    executor: str = ""
    task_attempt_id: int = 0
    attempt: int = 0
    stage_id: int = 0
    stage_attempt: int = -1


def task_identity() -> TaskIdentity:
    """The running task's identity (``TaskIdentity()`` outside a Spark task)."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return TaskIdentity()
    context = TaskContext.get()
    if context is None:
        return TaskIdentity()
    stage_attempt = context.getLocalProperty(STAGE_ATTEMPT_PROPERTY)
    return TaskIdentity(context.getLocalProperty(EXECUTOR_PROPERTY) or "", int(context.taskAttemptId()),
                        int(context.attemptNumber()), int(context.stageId()),
                        int(stage_attempt) if stage_attempt is not None else -1)


def task_partition() -> int:
    """The partition index of the running Spark task. Raises ``RuntimeError`` outside a task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("blobstate's partition task runs outside a Spark task")
    return int(context.partitionId())


__all__ = ["EXECUTOR_PROPERTY", "STAGE_ATTEMPT_PROPERTY", "TaskIdentity", "task_identity", "task_partition"]
