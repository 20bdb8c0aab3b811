/*
 * blobstate's JVM helper for graceful decommission: which executors Spark is decommissioning.
 *
 * When an executor is decommissioned (spark.decommission.enabled: the executor's signal handler, SIGPWR by default;
 * its standalone worker's; the master's decommission endpoint; dynamic allocation shrinking), the driver's task
 * scheduler records it (TaskSchedulerImpl.executorDecommission) and answers getExecutorDecommissionState(id) with an
 * ExecutorDecommissionState (when it started, and the worker's host when the whole worker goes) until the executor
 * is removed; the scheduler backend stops offering its cores, so no new task runs there. Spark posts no listener
 * event when a decommission starts: the driver asks, here, and blobstate.spark.placement.decommission polls it.
 */
package blobstate.spark;

import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.ExecutorDecommissionState;
import org.apache.spark.scheduler.TaskScheduler;
import org.apache.spark.storage.BlockManagerId;

import scala.Option;

public final class Decommission {
    private Decommission() {
    }

    /**
     * The locations ("executor_<host>_<executorId>", as PlacedRDD.executorLocations gives them) of the executors
     * registered with the driver's block manager master that the task scheduler holds a decommission state for,
     * '\n'-separated; empty when none is leaving (or before the scheduler exists).
     */
    public static String leavingLocations(SparkContext sc) {
        TaskScheduler scheduler = sc.taskScheduler();
        StringBuilder out = new StringBuilder();
        if (scheduler == null) {
            return "";
        }
        scala.collection.Iterator<BlockManagerId> ids =
            sc.env().blockManager().master().getMemoryStatus().keysIterator();
        while (ids.hasNext()) {
            BlockManagerId id = ids.next();
            if (id.isDriver()) {
                continue;
            }
            Option<ExecutorDecommissionState> state = scheduler.getExecutorDecommissionState(id.executorId());
            if (state.isDefined()) {
                if (out.length() > 0) {
                    out.append('\n');
                }
                out.append(PlacedRDD.location(id));
            }
        }
        return out.toString();
    }
}
