"""Produces to a leader cut off from the rest of its cluster (run inside its network
namespace, so it can reach nobody else).
  minority.py BOOTSTRAP TOPIC PARTITION COUNT SECONDS
      sends COUNT messages "minority-i" with acks=all (not idempotent) to PARTITION,
      waits at most SECONDS for their outcome and prints how many were acknowledged"""
import sys

from confluent_kafka import Producer

bootstrap, topic, partition, count, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
acknowledged = 0


def report(err, msg):
    global acknowledged
    if err is None:
        acknowledged += 1


p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
              "message.timeout.ms": seconds * 1000, "linger.ms": 5})
for i in range(count):
    p.produce(topic, key=f"minority-{i}", value=f"minority-{i}", partition=partition, on_delivery=report)
p.flush(seconds + 5)
print(acknowledged)
