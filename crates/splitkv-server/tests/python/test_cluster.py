"""redis-py's RedisCluster against three splitkv-server nodes on 127.0.0.1.

The server binary comes from SPLITKV_SERVER_BIN (CI sets it to the cargo-built binary).
"""

import os
import random
import socket
import subprocess
import tempfile

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

RANGES = ["0-5460", "5461-10922", "10923-16383"]


def free_fixed_ports(n):
    """n distinct ports, free now, below the kernel's ephemeral range: a port from bind(":0")
    could be handed to a client connection before the server binds it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_start = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_start = 32768
    low = min(10000, ephemeral_start // 2)
    ports = []
    while len(ports) < n:
        port = random.randrange(low, ephemeral_start)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in ports:
            ports.append(port)
    return ports


def start_nodes(binary, root, ports):
    """Starts the three nodes; returns them, or None (all stopped) if one could not listen."""
    procs = []
    for i, slots in enumerate(RANGES):
        args = [binary, "--dir", os.path.join(root, f"node{i}"), "--port", str(ports[i]),
                "--cluster-slots", slots, "--cluster-myid", f"node{i}"]
        for j in range(3):
            if j != i:
                args += ["--cluster-node", f"node{j}=127.0.0.1:{ports[j]}@{RANGES[j]}"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        # The server prints its ready line once the port accepts connections, and exits
        # without one when the port is taken.
        if "ready on" not in proc.stdout.readline():
            for p in procs:
                p.kill()
                p.wait()
            return None
    return procs


@pytest.fixture(scope="module")
def cluster():
    binary = os.environ.get("SPLITKV_SERVER_BIN")
    if not binary:
        pytest.fail("set SPLITKV_SERVER_BIN to the splitkv-server binary")
    root = tempfile.TemporaryDirectory()
    procs = None
    try:
        # Every node must know the others' ports before any starts, so a port taken between
        # the probe and the bind can only be retried, on fresh ports.
        for _ in range(5):
            ports = free_fixed_ports(len(RANGES))
            procs = start_nodes(binary, root.name, ports)
            if procs is not None:
                break
        assert procs is not None, "no cluster started in 5 attempts"
        yield ports
    finally:
        for proc in procs or []:
            proc.terminate()
        for proc in procs or []:
            assert proc.wait() == 0
        root.cleanup()


def node_client(port):
    return redis.Redis(host="127.0.0.1", port=port)


def test_keys_spread_over_all_nodes(cluster):
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", cluster[0])])
    for i in range(300):
        assert rc.set(f"key:{i}", i)
    for i in range(300):
        assert rc.get(f"key:{i}") == str(i).encode()
    sizes = [node_client(p).dbsize() for p in cluster]
    assert sum(sizes) == 300
    assert all(s > 50 for s in sizes), sizes
    # Each node holds exactly the keys of its own slots.
    for port in cluster:
        node = node_client(port)
        for key in node.keys("*"):
            assert rc.nodes_manager.get_node_from_slot(rc.keyslot(key)).port == port
    rc.close()


def test_types_and_hash_tags(cluster):
    rc = RedisCluster(host="127.0.0.1", port=cluster[1])
    assert rc.hset("user:{42}:profile", mapping={"name": "ada", "lang": "rust"}) == 2
    assert rc.hgetall("user:{42}:profile") == {b"name": b"ada", b"lang": b"rust"}
    assert rc.zadd("board:{42}", {"a": 1, "b": 2.5}) == 2
    assert rc.zrange("board:{42}", 0, -1, withscores=True) == [(b"a", 1.0), (b"b", 2.5)]
    assert rc.incr("visits:{42}") == 1
    # Same tag, same slot: an atomic multi-key command goes to one node.
    assert rc.mset({"{42}:a": "1", "{42}:b": "2"})
    assert rc.mget("{42}:a", "{42}:b") == [b"1", b"2"]
    # Keys of different slots: redis-py splits the request by slot itself.
    assert rc.mget_nonatomic("key:1", "key:2", "missing") == [b"1", b"2", None]
    assert rc.expire("visits:{42}", 100)
    assert 0 < rc.ttl("visits:{42}") <= 100
    assert rc.delete("{42}:a") == 1
    rc.close()


def test_pipeline_and_errors(cluster):
    rc = RedisCluster(host="127.0.0.1", port=cluster[2])
    pipe = rc.pipeline()
    for i in range(50):
        pipe.set(f"p:{i}", i)
    assert all(pipe.execute())
    assert rc.get("p:49") == b"49"
    rc.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        rc.hget("str", "f")
    # A direct, non-cluster client gets the redirect itself.
    owner_slot = rc.keyslot("foo")
    stranger = next(p for p in cluster if rc.nodes_manager.get_node_from_slot(owner_slot).port != p)
    with pytest.raises(redis.exceptions.MovedError, match=r"^12182 127\.0\.0\.1:\d+$"):
        node_client(stranger).get("foo")
    info = rc.cluster_info()
    assert info["cluster_state"] == "ok"
    rc.close()
