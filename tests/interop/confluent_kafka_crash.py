"""Produces COUNT messages with confluent-kafka (idempotent, acks=all) and writes the
key of every acknowledged message to ACKED, one per line, while the test kills and
restarts the broker underneath. Then, in `check` mode, consumes everything and verifies
every acknowledged message is present with intact content.
Usage: confluent_kafka_crash.py produce BOOTSTRAP TOPIC COUNT ACKED
       confluent_kafka_crash.py check BOOTSTRAP TOPIC ACKED"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "produce":
    count, acked_path = int(sys.argv[4]), sys.argv[5]
    with open(acked_path, "w") as acked:
        def report(err, msg):
            if err is None:
                acked.write(msg.key().decode() + "\n")
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 60000})
        for i in range(count):
            while True:
                try:
                    producer.produce(topic, key=f"k{i}", value=f"value-{i}-" + "p" * 200, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            if i % 1000 == 0:
                time.sleep(0.01)
        producer.flush(90)
    print("produced")
else:
    acked_path = sys.argv[4]
    acked = [line.strip() for line in open(acked_path) if line.strip()]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    metadata = consumer.list_topics(topic, timeout=10)
    partitions = list(metadata.topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    values = {}
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    remaining = sum(ends.values())
    idle = 0
    while remaining > 0 and idle < 100:
        m = consumer.poll(0.2)
        if m is None:
            idle += 1
            continue
        assert m.error() is None, m.error()
        values.setdefault(m.key().decode(), m.value().decode())
        remaining -= 1
    consumer.close()
    lost = [k for k in acked if values.get(k) != f"value-{k[1:]}-" + "p" * 200]
    assert not lost, f"{len(lost)} acknowledged messages lost or altered, e.g. {lost[:5]}"
    print(f"all {len(acked)} acknowledged messages present and intact ({len(values)} in the log)")
