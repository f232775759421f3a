import { AssignerProtocol, type PartitionAssigner } from 'kafkajs';

/**
 * Assigns partition p of every input topic to the same member, so a processor sees all of a
 * venue's inputs (events, ingest reports) with one state. Members take partitions round robin in
 * member-id order.
 */
export const coPartitioned: PartitionAssigner = ({ cluster }) => ({
  name: 'CoPartitioned',
  version: 1,
  async assign({ members, topics }) {
    const ids = members.map((m) => m.memberId).sort();
    const byMember = new Map<string, Record<string, number[]>>(ids.map((id) => [id, {}]));
    for (const topic of topics) {
      for (const { partitionId } of cluster.findTopicPartitionMetadata(topic)) {
        const owner = byMember.get(ids[partitionId % ids.length]!)!;
        (owner[topic] ??= []).push(partitionId);
      }
    }
    return ids.map((memberId) => ({
      memberId,
      memberAssignment: AssignerProtocol.MemberAssignment.encode({
        version: 1,
        assignment: byMember.get(memberId)!,
        userData: Buffer.alloc(0),
      }),
    }));
  },
  protocol({ topics }) {
    return { name: 'CoPartitioned', metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData: Buffer.alloc(0) }) };
  },
});
