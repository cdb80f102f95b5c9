"""The estimator on a running cluster: two ``didnmf serve`` processes on loopback, secured by
a cluster secret or by mutual-TLS certificates. An in-memory X is streamed to the shards, a path under the nodes' data root
is read by them; both give the local fit's bits. A KeyboardInterrupt cancels the job on the
cluster too."""

import base64
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import didnmf
from test_interrupt_verbose import Progress, interrupt_when_iterating


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_members(binary, addr, client_flags, count, logs):
    """Wait until the cluster at addr lists count members (or fail with the nodes' logs)."""
    deadline = time.monotonic() + 60
    while True:
        st = subprocess.run([binary, "status", "--cluster", addr] + client_flags, capture_output=True, text=True)
        if st.returncode == 0 and st.stdout.count(" member ") == count:
            return
        if time.monotonic() > deadline:
            text = "".join(log.read_text() for log in logs if log.exists())
            pytest.fail(f"the cluster did not reach {count} members: {st.stdout}{st.stderr}\n{text}")
        time.sleep(0.2)


@pytest.fixture(scope="module", params=["secret", "tls"])
def cluster(binary, tmp_path_factory, request):
    """Two members on loopback, secured by a cluster secret or by mutual-TLS certificates
    (``didnmf certs``); yields (gossip address, the client's security keyword arguments,
    data root)."""
    root = tmp_path_factory.mktemp("cluster")
    data = root / "data"
    data.mkdir()
    if request.param == "secret":
        secret = root / "cluster.secret"  # the first serve makes it
        node_flags = {name: ["--secret-file", str(secret)] for name in ("n1", "n2")}
        client = {"secret_file": str(secret)}
    else:
        certs = root / "certs"
        for name, extra in (("n1", []), ("n2", []), ("alice", ["--client"])):
            subprocess.run([binary, "certs", "--name", name, "--hosts", "127.0.0.1", "--dir", str(certs)] + extra,
                           check=True, capture_output=True)
        gossip_key = root / "gossip.key"  # the members need one with certificates; clients not
        gossip_key.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
        gossip_key.chmod(0o600)
        node_flags = {
            name: ["--tls-ca", str(certs / "ca.pem"), "--tls-cert", str(certs / f"{name}.pem"),
                   "--tls-key", str(certs / f"{name}-key.pem"), "--gossip-key-file", str(gossip_key)]
            for name in ("n1", "n2")
        }
        client = {"tls_ca": str(certs / "ca.pem"), "tls_cert": str(certs / "alice.pem"),
                  "tls_key": str(certs / "alice-key.pem")}
    client_flags = [f"--{k.replace('_', '-')}={v}" for k, v in client.items()]
    procs, logs = [], []
    first = None
    try:
        for name in ("n1", "n2"):
            addr = f"127.0.0.1:{free_port()}"
            args = [binary, "serve", "--bind", addr, "--name", name, "--data-root", str(data),
                    "--data-dir", str(root / name)] + node_flags[name]
            if first:
                args += ["--join", first]
            logs.append(root / f"{name}.log")
            with open(logs[-1], "wb") as log:
                procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            first = first or addr
            wait_members(binary, first, client_flags, len(procs), logs)
        yield first, client, client_flags, data
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)  # serve leaves the cluster on SIGINT
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_fit_on_the_cluster_same_bits(counts, cluster):
    addr, client, _, data = cluster
    local = didnmf.NMF(5, random_state=4, shards=2)
    W_local = local.fit_transform(counts)
    remote = didnmf.NMF(5, random_state=4, shards=2, cluster=addr, **client)
    W = remote.fit_transform(counts)
    assert remote.report_["ingest"] == "stream" and len(remote.report_["shard_nodes"]) == 2
    assert remote.components_.tobytes() == local.components_.tobytes()
    assert W.tobytes() == W_local.tobytes()
    assert remote.transform(counts).tobytes() == local.transform(counts).tobytes()

    path = data / "x.npy"  # on the nodes' data root: read by them, not by this process
    np.save(path, counts)
    shared = didnmf.NMF(5, random_state=4, shards=2, cluster=addr, **client).fit(str(path))
    assert shared.report_["ingest"] == "shared"
    assert shared.components_.tobytes() == local.components_.tobytes()


def test_interrupt_cancels_on_the_cluster(cluster, binary, monkeypatch):
    addr, client, client_flags, _ = cluster
    X = np.random.default_rng(0).random((3000, 300))
    est = didnmf.NMF(20, tol=0, max_iter=100000, time_limit=60, shards=2, cluster=addr, verbose=1, **client)
    progress = Progress()
    monkeypatch.setattr(sys, "stderr", progress)
    t = interrupt_when_iterating(progress)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X)
    t.join()
    err = "".join(progress.text)
    assert "the job was cancelled on its actors" in err, err
    jobs = subprocess.run([binary, "jobs", "--cluster", addr] + client_flags, capture_output=True, text=True)
    assert jobs.returncode == 0 and "no jobs" in jobs.stdout, jobs.stdout + jobs.stderr
