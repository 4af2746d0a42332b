"""committed_offsets.py BOOTSTRAP GROUP TOPIC
A group's committed offset of every partition of TOPIC equals the partition's end
offset (the group consumed everything and committed it), read with confluent-kafka."""
import sys

from confluent_kafka import Consumer, TopicPartition

bootstrap, group, topic = sys.argv[1:4]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
partitions = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
committed = {tp.partition: tp.offset for tp in
             c.committed([TopicPartition(topic, p) for p in partitions], timeout=10)}
ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
c.close()
assert all(ends[p] > 0 for p in partitions), f"nothing produced: {ends}"
assert committed == ends, f"committed {committed}, end offsets {ends}"
print(f"group {group} committed the end of all {len(partitions)} partitions: {ends}")
