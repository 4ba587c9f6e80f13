package falkirk.spark;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.TreeSet;

import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.BlockReplicationPolicy;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Chained declustering (Hsiao and DeWitt; the Flux paper's partition pairs): the
 * executors form a ring ordered by executor id, and the copy of a block an executor
 * holds goes to the next executor of the ring (then the one after it, if that one
 * cannot take it). When executors hold consecutive partitions, partition i's copy
 * lies beside partition i+1's primary, and the loss of one executor moves its load
 * to its neighbour only. Spark's default policy picks a random peer instead.
 *
 * Enabled by falkirk.spark.placement (spark.storage.replication.policy).
 */
public class ChainedDeclustering implements BlockReplicationPolicy {

    /** Executor ids in ring order: numeric ids by value, any other after them by name. */
    static final Comparator<String> RING = Comparator
            .comparing((String id) -> !id.chars().allMatch(Character::isDigit) || id.isEmpty())
            .thenComparing(id -> id.chars().allMatch(Character::isDigit) && !id.isEmpty() ? Long.parseLong(id) : 0L)
            .thenComparing(id -> id);

    @Override
    public scala.collection.immutable.List<BlockManagerId> prioritize(
            BlockManagerId self,
            scala.collection.immutable.Seq<BlockManagerId> peers,
            scala.collection.mutable.HashSet<BlockManagerId> replicatedTo,
            BlockId blockId,
            int numReplicas) {
        List<BlockManagerId> candidates = new ArrayList<>(CollectionConverters.asJava(peers));
        TreeSet<String> ids = new TreeSet<>(RING);
        ids.add(self.executorId());
        for (BlockManagerId p : candidates) {
            ids.add(p.executorId());
        }
        List<String> ring = new ArrayList<>(ids);
        int at = ring.indexOf(self.executorId());
        int n = ring.size();
        candidates.sort(Comparator.comparingInt(p -> Math.floorMod(ring.indexOf(p.executorId()) - at, n)));
        List<BlockManagerId> chosen = candidates.subList(0, Math.min(Math.max(numReplicas, 0), candidates.size()));
        return CollectionConverters.asScala(new ArrayList<>(chosen)).toList();
    }
}
