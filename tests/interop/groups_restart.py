"""kafka-python group across a broker restart, plus the group admin calls.
  groups_restart.py first BOOTSTRAP TOPIC COUNT KEYS_FILE   produce, consume half, commit, close
  groups_restart.py second BOOTSTRAP TOPIC COUNT KEYS_FILE  resume after the restart, then list,
                                                            describe and delete the group"""
import sys

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

phase, bootstrap, topic, count, keys_file = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]


def consume(limit):
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="restart-group", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=6000, session_timeout_ms=6000,
                      heartbeat_interval_ms=500)
    got = []
    for m in c:
        got.append(m.key.decode())
        if len(got) == limit:
            break
    c.commit()
    c.close()
    return got


if phase == "first":
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(count):
        p.send(topic, key=f"k{i}".encode(), value=b"v")
    p.flush()
    p.close()
    first = consume(count // 2)
    assert len(first) == count // 2
    open(keys_file, "w").write("\n".join(first))
    print(f"consumed and committed {len(first)}")
else:
    first = open(keys_file).read().split("\n")
    second = consume(count)
    assert not set(first) & set(second), "nothing re-delivered after the restart"
    assert set(first) | set(second) == {f"k{i}" for i in range(count)}, "nothing missing"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)

    def field(obj, name):
        return obj[name] if isinstance(obj, dict) else getattr(obj, name)

    groups = [field(g, "group_id") for g in admin.list_groups()]
    assert "restart-group" in groups, groups
    described = admin.describe_groups(["restart-group"])
    described = described[0] if isinstance(described, list) else described["restart-group"]
    state = described.get("group_state", described.get("state")) if isinstance(described, dict) else described.state
    assert state == "Empty", described
    offsets = admin.list_group_offsets({"restart-group": None})["restart-group"]
    assert sum(o.offset for o in offsets.values()) == count, offsets
    admin.delete_groups(["restart-group"])
    left = admin.list_group_offsets({"restart-group": None}).get("restart-group") or {}
    assert not left, f"offsets deleted with the group: {left}"
    admin.close()
    print(f"resumed with {len(second)} after the restart; list, describe, offsets and delete ok")
