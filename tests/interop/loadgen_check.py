"""Reads back everything loadgen produced to TOPIC with kafka-python (which checks every
batch's CRC) and verifies each record: value SIZE bytes, the 16-byte header (send time,
sequence number) followed by loadgen's filler pattern, every sequence number once.
Usage: loadgen_check.py BOOTSTRAP TOPIC COUNT SIZE"""
import struct
import sys

from kafka import KafkaConsumer, TopicPartition

bootstrap, topic, count, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
FILLER = b"loadgen payload "
expected_filler = (FILLER * (size // len(FILLER) + 1))[: size - 16]

consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         check_crcs=True, consumer_timeout_ms=10000)
partitions = consumer.partitions_for_topic(topic)
assert partitions, f"topic {topic} not found"
consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
consumer.seek_to_beginning()

sequences = set()
per_partition = {}
for record in consumer:
    value = record.value
    assert record.key is None, record
    assert len(value) == size, (len(value), size)
    send_ns, sequence = struct.unpack(">QQ", value[:16])
    assert value[16:] == expected_filler, value[16:64]
    assert sequence not in sequences, f"sequence {sequence:#x} twice"
    sequences.add(sequence)
    assert record.offset == per_partition.get(record.partition, 0), (record.partition, record.offset)
    per_partition[record.partition] = record.offset + 1
    if len(sequences) == count:
        break

assert len(sequences) == count, f"read {len(sequences)} of {count}"
print(f"kafka-python read {count} loadgen records intact over {len(per_partition)} partitions")
