"""Throughput through confluent-kafka (librdkafka): produce COUNT messages of SIZE bytes
with acks=all and linger.ms=5, then consume them all back. Prints one JSON line.
Usage: produce_consume.py BOOTSTRAP TOPIC COUNT SIZE"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic, count, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
payload = b"w" * size
failed = []
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                     "queue.buffering.max.messages": 1000000, "queue.buffering.max.kbytes": 1048576})
started = time.perf_counter()
for i in range(count):
    while True:
        try:
            producer.produce(topic, value=payload, partition=0,
                             on_delivery=lambda err, msg: failed.append(err) if err else None)
            break
        except BufferError:
            producer.poll(0.001)
producer.flush(120)
produce_s = time.perf_counter() - started
assert not failed, failed[:3]

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                     "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": 16 * 1024 * 1024})
consumer.assign([TopicPartition(topic, 0, 0)])
received = 0
started = time.perf_counter()
while received < count:
    messages = consumer.consume(10000, 1.0)
    for m in messages:
        assert m.error() is None, m.error()
    received += len(messages)
consume_s = time.perf_counter() - started
consumer.close()
mb = count * size / 1e6
print(json.dumps({"count": count, "size": size,
                  "produce_msgs_per_s": count / produce_s, "produce_mb_per_s": mb / produce_s,
                  "consume_msgs_per_s": count / consume_s, "consume_mb_per_s": mb / consume_s}))
