//! Three nodes sharing one slot map: redirects, CROSSSLOT, the CLUSTER replies, and a
//! cluster-aware walk that follows MOVED to the owner, as `redis-cli -c` does.

mod common;

use common::{error_of, free_fixed_ports, ServerProcess, TestResult};
use redis::Commands;

pub const RANGES: [&str; 3] = ["0-5460", "5461-10922", "10923-16383"];

/// Starts three nodes on free ports, each told the whole map. Every node must know the others'
/// ports before any starts, so a port taken between the probe and the bind (by a concurrent
/// test) cannot be avoided, only retried: the whole cluster then starts again on fresh ports.
pub fn start_cluster(root: &std::path::Path) -> Vec<ServerProcess> {
    const ATTEMPTS: usize = 5;
    let mut failures = Vec::new();
    for _ in 0..ATTEMPTS {
        match try_start_cluster(root, &free_fixed_ports(3)) {
            Ok(nodes) => return nodes,
            Err(e) => failures.push(e),
        }
    }
    panic!("no cluster started in {ATTEMPTS} attempts: {failures:?}")
}

fn try_start_cluster(root: &std::path::Path, ports: &[u16]) -> Result<Vec<ServerProcess>, String> {
    (0..3)
        .map(|i| {
            let mut args = vec![
                "--cluster-slots".to_string(),
                RANGES[i].to_string(),
                "--cluster-myid".to_string(),
                format!("node{i}"),
            ];
            for j in (0..3).filter(|&j| j != i) {
                args.push("--cluster-node".into());
                args.push(format!("node{j}=127.0.0.1:{}@{}", ports[j], RANGES[j]));
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            ServerProcess::try_start_on(&root.join(format!("node{i}")), ports[i], &args)
        })
        .collect()
}

/// Runs GET/SET against whichever node, following MOVED once like a cluster client.
fn follow(nodes: &[ServerProcess], first: usize, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(&mut nodes[first].client()) {
        Err(e) if e.code() == Some("MOVED") => {
            let addr = e.detail().and_then(|d| d.split_whitespace().nth(1)).expect("MOVED slot host:port");
            let port: u16 = addr.rsplit(':').next().and_then(|p| p.parse().ok()).expect("port");
            let owner = nodes.iter().find(|n| n.port == port).expect("MOVED names a node");
            cmd.query(&mut owner.client())
        }
        other => other,
    }
}

#[test]
fn keys_are_spread_by_slot_and_redirected() -> TestResult {
    let root = tempfile::tempdir()?;
    let nodes = start_cluster(root.path());
    let mut con = nodes[0].client();
    // "foo" is slot 12182 (node 2); "bar" 5061 (node 0).
    let moved = error_of(&mut con, &["SET", "foo", "1"]);
    assert_eq!(moved, format!("MOVED 12182 127.0.0.1:{}", nodes[2].port));
    let _: () = con.set("bar", "here")?;
    assert_eq!(error_of(&mut con, &["MGET", "bar", "foo"]), "CROSSSLOT Keys in request don't hash to the same slot");
    // Hash tags keep related keys in one slot, so multi-key commands work.
    let tag_owner = nodes.iter().position(|n| {
        let mut c = n.client();
        redis::cmd("MSET").arg(&["{user1}.a", "1", "{user1}.b", "2"]).query::<()>(&mut c).is_ok()
    });
    let owner = tag_owner.expect("some node owns {user1}");
    let got: Vec<String> = nodes[owner].client().mget(&["{user1}.a", "{user1}.b"])?;
    assert_eq!(got, vec!["1", "2"]);
    // Every key written through redirects lands on exactly one node.
    for i in 0..60 {
        let key = format!("key:{i}");
        follow(&nodes, i % 3, &["SET", &key, &i.to_string()])?;
    }
    let mut total = 0;
    for n in &nodes {
        total += redis::cmd("DBSIZE").query::<i64>(&mut n.client())?;
    }
    assert_eq!(total, 60 + 1 + 2);
    for n in &nodes {
        assert!(redis::cmd("DBSIZE").query::<i64>(&mut n.client())? > 0, "a node got no keys");
    }
    Ok(())
}

#[test]
fn cluster_replies_describe_the_map() -> TestResult {
    let root = tempfile::tempdir()?;
    let nodes = start_cluster(root.path());
    let mut con = nodes[1].client();
    assert_eq!(redis::cmd("CLUSTER").arg("MYID").query::<String>(&mut con)?, "node1");
    let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con)?;
    assert!(info.contains("cluster_state:ok"), "{info}");
    assert!(info.contains("cluster_known_nodes:3"), "{info}");
    let slots: Vec<(i64, i64, (String, u16, String))> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con)?;
    assert_eq!(slots.len(), 3);
    assert_eq!(slots[1], (5461, 10922, ("127.0.0.1".to_string(), nodes[1].port, "node1".to_string())));
    let shards: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SHARDS").query(&mut con)?;
    assert_eq!(shards.len(), 3);
    let text: String = redis::cmd("CLUSTER").arg("NODES").query(&mut con)?;
    assert_eq!(text.lines().count(), 3);
    assert!(text.lines().any(|l| l.starts_with("node1 ") && l.contains("myself,master") && l.ends_with("5461-10922")));
    assert_eq!(redis::cmd("CLUSTER").arg(&["KEYSLOT", "{user1000}.following"]).query::<i64>(&mut con)?, 3443);
    Ok(())
}

#[test]
fn redis_cli_follows_redirects() -> TestResult {
    if std::process::Command::new("redis-cli").arg("--version").output().is_err() {
        println!("SKIPPED: redis-cli is not installed (CI installs redis-tools)");
        return Ok(());
    }
    let root = tempfile::tempdir()?;
    let nodes = start_cluster(root.path());
    let port = nodes[0].port.to_string();
    let run = |args: &[&str]| -> String {
        let out =
            std::process::Command::new("redis-cli").args(["-c", "-p", &port]).args(args).output().expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(run(&["SET", "foo", "from-cli"]), "OK");
    assert_eq!(run(&["GET", "foo"]), "from-cli");
    // It was stored on the owner of slot 12182, node 2.
    assert_eq!(nodes[2].client().get::<_, String>("foo")?, "from-cli");
    Ok(())
}

/// The retry in `start_cluster` rests on this: a node whose port is taken exits without a
/// ready line, and the start reports it instead of hanging or panicking.
#[test]
fn a_node_on_a_taken_port_fails_to_start() -> TestResult {
    let root = tempfile::tempdir()?;
    let taken = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = taken.local_addr()?.port();
    let err =
        ServerProcess::try_start_on(&root.path().join("node"), port, &[]).err().ok_or("started on a taken port")?;
    assert!(err.contains(&format!("port {port}")), "{err}");
    Ok(())
}
