//! `weir groups …`: consumer groups over Kafka's group APIs, as
//! `kafka-consumer-groups.sh` uses them — ListGroups on every broker, DescribeGroups and
//! OffsetFetch at the group's coordinator, and an offsets reset as an OffsetCommit by a
//! member-less client.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::{
    messages::{
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        ConsumerProtocolAssignment, DescribeGroupsRequest, FindCoordinatorRequest, GroupId,
        ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest,
    },
    protocol::{Decodable, StrBytes},
};

use super::commands::{
    check, name, with_coordinator_retries, Admin, AdminError, ResetTarget, Result,
};

/// A group member as DescribeGroups shows it: member id, client id, assigned partitions.
type GroupMember = (String, String, Vec<(String, i32)>);

impl Admin {
    /// `groups list`: every group on every broker.
    pub fn groups_list(&mut self) -> Result<String> {
        let mut groups = Vec::new();
        for id in self.broker_ids() {
            let r = self.node(id)?.call(&ListGroupsRequest::default(), 4)?;
            check(r.error_code, format!("list groups on broker {id}"))?;
            for g in r.groups {
                groups.push((
                    g.group_id.0.as_str().to_string(),
                    g.group_state.as_str().to_string(),
                ));
            }
        }
        groups.sort();
        let mut out = String::from("GROUP\tSTATE\n");
        for (g, state) in groups {
            out.push_str(&format!("{g}\t{state}\n"));
        }
        Ok(out)
    }

    /// Runs `call` at `group`'s coordinator, retried as [`with_coordinator_retries`]
    /// says. Each try asks where the group is, as Kafka's clients do after
    /// NOT_COORDINATOR: the node found first may have handed the group on.
    fn at_coordinator<T>(
        &mut self,
        group: &str,
        mut call: impl FnMut(&mut Admin, i32) -> Result<T>,
    ) -> Result<T> {
        with_coordinator_retries(|| {
            let at = self.coordinator(group)?;
            call(self, at)
        })
    }

    fn coordinator(&mut self, group: &str) -> Result<i32> {
        let mut req = FindCoordinatorRequest::default();
        req.key = StrBytes::from_string(group.to_string());
        let r = self.bootstrap().call(&req, 3)?;
        check(r.error_code, format!("find coordinator of {group}"))?;
        Ok(r.node_id.0)
    }

    fn group_state(&mut self, coordinator: i32, group: &str) -> Result<(String, Vec<GroupMember>)> {
        let mut req = DescribeGroupsRequest::default();
        req.groups = vec![GroupId(StrBytes::from_string(group.to_string()))];
        let r = self.node(coordinator)?.call(&req, 5)?;
        let g = r
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| AdminError::Refused("empty DescribeGroups answer".into()))?;
        check(g.error_code, format!("describe group {group}"))?;
        let members = g
            .members
            .iter()
            .map(|m| {
                let mut assignment = Vec::new();
                let mut bytes = m.member_assignment.clone();
                if bytes.len() >= 2 {
                    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
                    bytes = bytes.slice(2..);
                    if let Ok(a) =
                        ConsumerProtocolAssignment::decode(&mut bytes, version.clamp(0, 3))
                    {
                        for tp in a.assigned_partitions {
                            for p in tp.partitions {
                                assignment.push((tp.topic.0.as_str().to_string(), p));
                            }
                        }
                    }
                }
                (
                    m.member_id.as_str().to_string(),
                    m.client_id.as_str().to_string(),
                    assignment,
                )
            })
            .collect();
        Ok((g.group_state.as_str().to_string(), members))
    }

    fn committed(&mut self, coordinator: i32, group: &str) -> Result<BTreeMap<(String, i32), i64>> {
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(StrBytes::from_string(group.to_string()));
        req.topics = None;
        let r = self.node(coordinator)?.call(&req, 7)?;
        check(r.error_code, format!("committed offsets of {group}"))?;
        let mut out = BTreeMap::new();
        for t in r.topics {
            for p in t.partitions {
                if p.committed_offset >= 0 {
                    out.insert(
                        (t.name.0.as_str().to_string(), p.partition_index),
                        p.committed_offset,
                    );
                }
            }
        }
        Ok(out)
    }

    /// `groups describe GROUP`: state, members with their partitions, and per partition
    /// the committed offset, log end offset and lag.
    pub fn groups_describe(&mut self, group: &str) -> Result<String> {
        let (coordinator, state, members) = self.at_coordinator(group, |admin, at| {
            let (state, members) = admin.group_state(at, group)?;
            Ok((at, state, members))
        })?;
        let committed = self.at_coordinator(group, |admin, at| admin.committed(at, group))?;
        let mut owner: HashMap<(String, i32), String> = HashMap::new();
        let mut out = format!(
            "group {group}: {state}, {} members, coordinator {coordinator}\nMEMBER\tCLIENT\tPARTITIONS\n",
            members.len()
        );
        for (id, client, assignment) in &members {
            let parts: Vec<String> = assignment.iter().map(|(t, p)| format!("{t}-{p}")).collect();
            out.push_str(&format!("{id}\t{client}\t{}\n", parts.join(",")));
            for tp in assignment {
                owner.insert(tp.clone(), id.clone());
            }
        }
        let mut topics: Vec<String> = committed.keys().map(|(t, _)| t.clone()).collect();
        topics.extend(owner.keys().map(|(t, _)| t.clone()));
        topics.sort();
        topics.dedup();
        out.push_str("TOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG\tMEMBER\n");
        for topic in topics {
            let leaders = self.leaders(&topic)?;
            let ends = self.offsets(&leaders, -1)?;
            for (t, p, _) in leaders {
                let key = (t.clone(), p);
                let end = ends[&key];
                let (c, lag) = match committed.get(&key) {
                    Some(c) => (c.to_string(), (end - c).max(0).to_string()),
                    None => ("-".into(), "-".into()),
                };
                let member = owner.get(&key).map_or("-", String::as_str);
                out.push_str(&format!("{t}\t{p}\t{c}\t{end}\t{lag}\t{member}\n"));
            }
        }
        Ok(out)
    }

    /// `groups reset-offsets GROUP --topic T --to-…`: refused while the group has
    /// members, as Kafka's tool does.
    pub fn groups_reset_offsets(
        &mut self,
        group: &str,
        topic: &str,
        target: ResetTarget,
    ) -> Result<String> {
        let (state, members) =
            self.at_coordinator(group, |admin, at| admin.group_state(at, group))?;
        if !members.is_empty() {
            return Err(AdminError::Refused(format!(
                "group {group} has {} active members (state {state}): stop its consumers before resetting offsets",
                members.len()
            )));
        }
        let leaders = self.leaders(topic)?;
        let targets: Vec<((String, i32), i64)> = match target {
            ResetTarget::Earliest => self.offsets(&leaders, -2)?.into_iter().collect(),
            ResetTarget::Latest => self.offsets(&leaders, -1)?.into_iter().collect(),
            ResetTarget::Offset(o) => leaders
                .iter()
                .map(|(t, p, _)| ((t.clone(), *p), o))
                .collect(),
        };
        let mut t = OffsetCommitRequestTopic::default();
        t.name = name(topic);
        t.partitions = targets
            .iter()
            .map(|((_, p), o)| {
                let mut cp = OffsetCommitRequestPartition::default();
                cp.partition_index = *p;
                cp.committed_offset = *o;
                cp
            })
            .collect();
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(StrBytes::from_string(group.to_string()));
        req.generation_id_or_member_epoch = -1;
        req.topics = vec![t];
        self.at_coordinator(group, |admin, at| {
            let r = admin.node(at)?.call(&req, 8)?;
            for rt in &r.topics {
                for p in &rt.partitions {
                    check(
                        p.error_code,
                        format!("reset {group} on {topic}-{}", p.partition_index),
                    )?;
                }
            }
            Ok(())
        })?;
        let mut sorted = targets;
        sorted.sort();
        let mut out = format!("reset group {group} on topic {topic}:\n");
        for ((_, p), o) in sorted {
            out.push_str(&format!("{topic}-{p}\t{o}\n"));
        }
        Ok(out)
    }
}
