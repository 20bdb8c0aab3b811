/*
 * blobstate's JVM helper for partitioned state on Spark: task placement by preferred location.
 *
 * A partition's state lives on the host (and in the executor) that ran its last task. Spark places the tasks of a
 * job by the preferred locations of its RDD (RDD.getPreferredLocations, read by the DAGScheduler; Spark's own
 * stateful operators return the executor the StateStoreCoordinator says loaded each store, StateStoreRDD). PySpark
 * cannot override that method, so this class wraps any RDD one to one (same partitions, same rows, a narrow
 * dependency: no shuffle, no copy) and returns the locations the driver chose for each partition. A location is
 * Spark's TaskLocation string: "executor_<host>_<executorId>" (ExecutorCacheTaskLocation: the executor first, any
 * executor of that host next) or a bare host; none leaves the choice to Spark. When the preferred executor is gone
 * or stays busy beyond spark.locality.wait, Spark's delay scheduling runs the task elsewhere.
 *
 * compute() also tells the task where it runs: before the Python worker reads the task's local properties (PySpark's
 * PythonRDD evaluates its parent's iterator, this compute, before its runner writes them), it sets
 * "blobstate.executor" (this executor's location string) and "blobstate.stageAttempt" (the stage attempt number,
 * which PySpark's TaskContext does not expose; read by blobstate.spark.executor.identity). Built from this source by
 * `python -m blobstate.spark.placement.helper_jar build` against the installed pyspark's jars (a JDK's javac), and
 * loaded at run time (blobstate.spark.placement.helper_jar).
 */
package blobstate.spark;

import java.util.Properties;

import org.apache.spark.Partition;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.storage.BlockManagerId;

import scala.collection.immutable.List;
import scala.collection.immutable.Nil$;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

public final class PlacedRDD<T> extends RDD<T> {
    private static final long serialVersionUID = 1L;

    /** The local property a task reads its executor's location from (Spark's "executor_<host>_<id>" form). */
    public static final String EXECUTOR_PROPERTY = "blobstate.executor";
    /** The local property a task reads its stage attempt number from. */
    public static final String STAGE_ATTEMPT_PROPERTY = "blobstate.stageAttempt";

    private final RDD<T> parent;
    private final String[][] locations;

    private PlacedRDD(RDD<T> parent, String[][] locations, ClassTag<T> tag) {
        super(parent, tag);
        this.parent = parent;
        this.locations = locations;
    }

    /**
     * rdd with preferred locations: {@code encoded} holds one line per partition ('\n'-separated, in partition
     * order), each line the partition's locations separated by '\t' (an empty line: no preference). Raises
     * IllegalArgumentException when the number of lines is not the number of partitions.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public static JavaRDD<Object> place(JavaRDD<?> rdd, String encoded) {
        RDD<Object> parent = (RDD<Object>) (RDD) rdd.rdd();
        int n = parent.partitions().length;
        String[] lines = encoded.split("\n", -1);
        if (lines.length != n) {
            throw new IllegalArgumentException(
                "PlacedRDD: " + lines.length + " location lines for " + n + " partitions");
        }
        String[][] locations = new String[n][];
        for (int i = 0; i < n; i++) {
            locations[i] = lines[i].isEmpty() ? new String[0] : lines[i].split("\t");
        }
        ClassTag<Object> tag = ClassTag$.MODULE$.apply(Object.class);
        return new JavaRDD<Object>(new PlacedRDD<Object>(parent, locations, tag), tag);
    }

    /** This executor's location, "executor_<host>_<executorId>" (Spark's ExecutorCacheTaskLocation string). */
    public static String executorLocation() {
        return location(SparkEnv.get().blockManager().blockManagerId());
    }

    /**
     * The locations of the executors registered with the driver's block manager master, '\n'-separated: every
     * executor but the driver, or the driver alone (local mode, where tasks run in the driver).
     */
    public static String executorLocations(SparkContext sc) {
        StringBuilder out = new StringBuilder();
        String driver = null;
        scala.collection.Iterator<BlockManagerId> ids =
            sc.env().blockManager().master().getMemoryStatus().keysIterator();
        while (ids.hasNext()) {
            BlockManagerId id = ids.next();
            if (id.isDriver()) {
                driver = location(id);
                continue;
            }
            if (out.length() > 0) {
                out.append('\n');
            }
            out.append(location(id));
        }
        return out.length() == 0 && driver != null ? driver : out.toString();
    }

    /** An executor's location, "executor_<host>_<executorId>" (also Decommission's form). */
    static String location(BlockManagerId id) {
        return "executor_" + id.host() + "_" + id.executorId();
    }

    @Override
    public Partition[] getPartitions() {
        return parent.partitions();
    }

    @Override
    public scala.collection.Iterator<T> compute(Partition split, TaskContext context) {
        Properties properties = context.getLocalProperties();
        properties.setProperty(EXECUTOR_PROPERTY, executorLocation());
        properties.setProperty(STAGE_ATTEMPT_PROPERTY, Integer.toString(context.stageAttemptNumber()));
        return parent.iterator(split, context);
    }

    @Override
    @SuppressWarnings("unchecked")
    public List<String> getPreferredLocations(Partition split) {
        List<String> out = (List<String>) (List<?>) Nil$.MODULE$;
        String[] mine = locations[split.index()];
        for (int i = mine.length - 1; i >= 0; i--) {
            out = out.$colon$colon(mine[i]);
        }
        return out;
    }
}
