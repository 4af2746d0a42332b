"""The reference producer for loadgen's own-throughput check: confluent-kafka
(librdkafka) producing COUNT messages of SIZE bytes round-robin to PARTITIONS partitions
of TOPIC as fast as it can, with the batching and acks loadgen uses (batch.size BATCH,
linger.ms 0, acks=all, 5 requests in flight). Prints one JSON line with messages per
second, counting from the first produce call to the last delivery report.
Usage: confluent_produce.py BOOTSTRAP TOPIC COUNT SIZE BATCH PARTITIONS"""
import json
import sys
import time

from confluent_kafka import Producer

bootstrap, topic = sys.argv[1], sys.argv[2]
count, size, batch = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
partitions = int(sys.argv[6])
payload = b"c" * size
failures = []


def report(err, _msg):
    if err is not None:
        failures.append(err)


producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                     "batch.size": batch, "max.in.flight.requests.per.connection": 5,
                     "enable.idempotence": False, "compression.type": "none",
                     "queue.buffering.max.messages": 1000000,
                     "queue.buffering.max.kbytes": 1048576})
started = time.perf_counter()
for i in range(count):
    while True:
        try:
            producer.produce(topic, value=payload, partition=i % partitions, on_delivery=report)
            break
        except BufferError:
            producer.poll(0.001)
    producer.poll(0)
producer.flush(120)
seconds = time.perf_counter() - started
assert not failures, failures[:3]
print(json.dumps({"messages": count, "seconds": seconds, "messages_per_second": count / seconds}))
