#!/usr/bin/env python3
"""The hold's benchmark (`make bench-hold`, docs/benchmarks.md): every piece a separate process.

`evac sim serve --no-components` is the API server of a 500-node cluster running 10,000 VMs (4Gi,
LiveMigrate), their launcher pods as `launcher-hold` makes them (a `preStop` hook to the node's
hold endpoint, the grace period raised by the 300 s window). Ten nodes are short of memory (the
kubelet's `MemoryPressure` condition, NodeMetrics under the soft threshold). `evac control` and
one `evac hold` per short node (each on its own loopback port, as each node has its own loopback)
run as in a cluster. This script plays the kubelet's eviction manager: it calls a launcher pod's
hook without deleting the pod, as the kubelet stops a pod for node pressure, and times from the
call to the moment a watch on the VMIs shows the evacuation asked for (`evac.kubevirt.io/
evacuate-from`): the hold endpoint's decision and its write of the hold, the watch to `evac
control`, its decision and its write of the request, and the watch back.

With no cluster components nothing moves: what is measured is evac's reaction, not KubeVirt's.

  1. one at a time on node001 (the eviction manager evicts one pod per node at a time);
  2. a burst: every other VM of node002..node010 at once (about 170 holds), as a preemption or
     a taint would stop a whole node's pods.

It also reports, for node001's endpoint, the bytes its watches received (through a counting
proxy): the initial lists, the bursts, and a quiet minute; and each endpoint's memory.

Usage: bench/hold.py [path/to/evac]
"""

import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

EVAC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/evac")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = os.path.join(ROOT, "examples/control/policies.yml")
NODES, VMS, SHORT = 500, 10_000, 10
NS = "tenants"
GI = 1 << 30
MI = 1 << 20
EVACUATE_FROM = "evac.kubevirt.io/evacuate-from"


def node_name(i):
    return f"node{i:03d}"


def vm_name(i):
    return f"vm{i:05d}"


def vm_node(i):
    return node_name((i - 1) % NODES + 1)


def objects():
    items = []
    gates = [
        "PreemptionEvictionLiveMigration",
        "NoExecuteTaintEvictionLiveMigration",
        "NodePressureEvictionLiveMigration",
    ]
    items.append({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
        "spec": {"configuration": {
            "developerConfiguration": {"featureGates": gates},
            "migrations": {"parallelMigrationsPerCluster": 5, "parallelOutboundMigrationsPerNode": 2},
        }},
        "status": {"phase": "Deployed"},
    })
    per_node = VMS // NODES
    for n in range(1, NODES + 1):
        name = node_name(n)
        short = n <= SHORT
        conditions = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        conditions.append({"type": "MemoryPressure", "status": "True" if short else "False",
                           "reason": "KubeletHasInsufficientMemory" if short else "KubeletHasSufficientMemory"})
        items.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": {"memory": "512Gi"}, "allocatable": {"memory": "510Gi"},
                       "conditions": conditions},
        })
        # Available memory: 3000Mi on a short node (under the 3500Mi soft threshold), else plenty.
        used = 512 * GI - 3000 * MI if short else per_node * 4 * GI + 8 * GI
        items.append({
            "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
            "metadata": {"name": name}, "timestamp": "2026-01-01T00:00:00Z", "window": "20s",
            "usage": {"cpu": "4", "memory": f"{used // 1024}Ki"},
        })
    for i in range(1, VMS + 1):
        name, node = vm_name(i), vm_node(i)
        uid = f"uid-{name}"
        items.append({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": NS, "uid": uid, "labels": {"kubevirt.io/nodeName": node}},
            "spec": {"evictionStrategy": "LiveMigrate", "domain": {"memory": {"guest": "4Gi"}}},
            "status": {"phase": "Running", "nodeName": node,
                       "conditions": [{"type": "Ready", "status": "True"},
                                      {"type": "LiveMigratable", "status": "True"}]},
        })
        # As launcher-hold leaves it (docs/architecture.md): the hook, the window, the grace.
        items.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": f"virt-launcher-{name}-abcde", "namespace": NS,
                "labels": {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": uid, "vm.kubevirt.io/name": name},
                "annotations": {"kubevirt.io/domain": name, "evac.kubevirt.io/hold-window": "300"},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                     "name": name, "uid": uid, "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 360,
                     "containers": [{"name": "compute", "image": "virt-launcher",
                                     "resources": {"requests": {"memory": "4Gi"}},
                                     "lifecycle": {"preStop": {"httpGet": {
                                         "host": "127.0.0.1", "port": 9190,
                                         "path": f"/hold/{NS}/{name}/compute"}}}}]},
            "status": {"phase": "Running"},
        })
    return {"apiVersion": "v1", "kind": "List", "items": items}


class Process:
    """A child process whose stdout is read for its `listening:` line."""

    def __init__(self, args, log):
        self.log = open(log, "w")
        env = dict(os.environ, EVAC_LOG=os.environ.get("EVAC_LOG", "info"))
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.addresses = {}
        deadline = time.time() + 300
        for line in self.proc.stdout:
            self.log.write(line)
            if line.startswith("listening:"):
                self.addresses = dict(pair.split("=", 1) for pair in line.split()[1:])
                break
            if time.time() > deadline:
                break
        if not self.addresses:
            self.stop()
            sys.exit(f"{args[1]} did not start; see {log}")
        threading.Thread(target=self.copy, daemon=True).start()

    def copy(self):
        for line in self.proc.stdout:
            self.log.write(line)
            self.log.flush()

    def memory(self):
        status = open(f"/proc/{self.proc.pid}/status").read()
        field = lambda key: int(re.search(rf"^{key}:\s+(\d+) kB", status, re.M).group(1)) / 1024
        return field("VmRSS"), field("VmHWM")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class CountingProxy:
    """A TCP proxy to the API server that counts the bytes sent each way."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.received = 0
        self.sent = 0
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            client, _ = self.server.accept()
            upstream = socket.create_connection(self.upstream)
            threading.Thread(target=self.pump, args=(upstream, client, "received"), daemon=True).start()
            threading.Thread(target=self.pump, args=(client, upstream, "sent"), daemon=True).start()

    def pump(self, source, sink, counter):
        try:
            while data := source.recv(65536):
                with self.lock:
                    setattr(self, counter, getattr(self, counter) + len(data))
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def counts(self):
        with self.lock:
            return self.received, self.sent


def get(api, path):
    with urllib.request.urlopen(api + path, timeout=60) as response:
        return json.load(response)


class RequestWatch:
    """A watch on the VMIs: when each first showed an evacuation request."""

    def __init__(self, api, resource_version):
        self.seen = {}
        self.cond = threading.Condition()
        url = f"{api}/apis/kubevirt.io/v1/virtualmachineinstances?watch=1&resourceVersion={resource_version}"
        self.response = urllib.request.urlopen(url, timeout=3600)
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        for line in self.response:
            at = time.monotonic()
            event = json.loads(line)
            vmi = event.get("object", {})
            annotations = vmi.get("metadata", {}).get("annotations") or {}
            marked = (vmi.get("status") or {}).get("evacuationNodeName")
            if EVACUATE_FROM in annotations or marked:
                with self.cond:
                    self.seen.setdefault(vmi["metadata"]["name"], at)
                    self.cond.notify_all()

    def wait_for(self, name, timeout):
        with self.cond:
            self.cond.wait_for(lambda: name in self.seen, timeout)
            return self.seen.get(name)


def hold(port, vm, started):
    """The kubelet's hook call: a long poll, left open until the process ends."""
    conn = socket.create_connection(("127.0.0.1", port))
    started[vm] = time.monotonic()
    conn.sendall(f"GET /hold/{NS}/{vm}/compute HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return conn


def percentiles(latencies):
    ms = sorted(x * 1000 for x in latencies)
    pick = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]
    return {"holds": len(ms), "p50_ms": round(pick(0.50), 1), "p99_ms": round(pick(0.99), 1),
            "max_ms": round(ms[-1], 1), "mean_ms": round(statistics.mean(ms), 1)}


def main():
    work = tempfile.mkdtemp(prefix="evac-bench-hold-")
    cache = os.path.join(work, "cache")
    objects_file = os.path.join(work, "objects.json")
    with open(objects_file, "w") as f:
        json.dump(objects(), f)
    kubeconfig = os.path.join(work, "kubeconfig")
    processes = []
    try:
        sim = Process([EVAC, "sim", "serve", "--addr", "127.0.0.1:0", "--kubeconfig", kubeconfig,
                       "--objects", objects_file, "--no-components"], os.path.join(work, "sim.log"))
        processes.append(sim)
        api = sim.addresses["api"]
        host, port = api.removeprefix("http://").split(":")
        proxy = CountingProxy((host, int(port)))
        proxied = os.path.join(work, "kubeconfig-proxied")
        with open(kubeconfig) as f, open(proxied, "w") as g:
            g.write(f.read().replace(api, f"http://127.0.0.1:{proxy.port}"))

        control = Process([EVAC, "control", "--policies", POLICIES, "--kubeconfig", kubeconfig,
                           "--metrics-addr", "127.0.0.1:0", "--cache-dir", cache], os.path.join(work, "control.log"))
        processes.append(control)
        holds = {}
        for n in range(1, SHORT + 1):
            name = node_name(n)
            config = proxied if n == 1 else kubeconfig
            holds[name] = Process([EVAC, "hold", "--policies", POLICIES, "--kubeconfig", config, "--node", name,
                                   "--addr", "127.0.0.1:0", "--probe-addr", "127.0.0.1:0", "--cache-dir", cache],
                                  os.path.join(work, f"hold-{name}.log"))
            processes.append(holds[name])
        synced = proxy.counts()
        # evac control's own node-pressure marks come first (the fewest VMs covering each short
        # node's gap); those VMs are left out.
        time.sleep(15)
        listed = get(api, "/apis/kubevirt.io/v1/virtualmachineinstances")
        requested = {v["metadata"]["name"] for v in listed["items"]
                     if EVACUATE_FROM in (v["metadata"].get("annotations") or {})
                     or (v.get("status") or {}).get("evacuationNodeName")}
        watch = RequestWatch(api, listed["metadata"]["resourceVersion"])
        port_of = {name: int(p.addresses["hold"].rsplit(":", 1)[1]) for name, p in holds.items()}
        on_node = lambda n: [vm_name(i) for i in range(1, VMS + 1)
                             if vm_node(i) == node_name(n) and vm_name(i) not in requested]
        before = proxy.counts()

        started, open_holds = {}, []
        one_at_a_time = []
        for vm in on_node(1)[:10]:
            open_holds.append(hold(port_of["node001"], vm, started))
            seen = watch.wait_for(vm, 60)
            if seen is None:
                sys.exit(f"no evacuation asked for {vm} within 60 s; see {work}")
            one_at_a_time.append(seen - started[vm])
            time.sleep(1)

        burst_vms = [(node_name(n), vm) for n in range(2, SHORT + 1) for vm in on_node(n)]
        for node, vm in burst_vms:
            open_holds.append(hold(port_of[node], vm, started))
        burst = []
        for _, vm in burst_vms:
            seen = watch.wait_for(vm, 120)
            if seen is None:
                sys.exit(f"no evacuation asked for {vm} within 120 s; see {work}")
            burst.append(seen - started[vm])
        after_holds = proxy.counts()
        time.sleep(60)
        quiet = proxy.counts()

        memory = {name: p.memory() for name, p in holds.items()}
        report = {
            "cluster": {"nodes": NODES, "vms": VMS, "shortNodes": SHORT,
                        "leftOut": sorted(requested)},
            "holdToEvacuationAsked": {"oneAtATime": percentiles(one_at_a_time), "burst": percentiles(burst)},
            "oneAtATimeMs": [round(x * 1000) for x in one_at_a_time],
            "node001Watches": {
                "initialListBytes": synced[0],
                "bytesDuringHolds": after_holds[0] - before[0],
                "bytesQuietMinute": quiet[0] - after_holds[0],
                "requestBytesTotal": quiet[1],
            },
            "holdEndpointMemoryMiB": {
                "rss": {"min": round(min(m[0] for m in memory.values()), 1),
                        "max": round(max(m[0] for m in memory.values()), 1)},
                "peak": {"min": round(min(m[1] for m in memory.values()), 1),
                         "max": round(max(m[1] for m in memory.values()), 1)},
            },
            "evacControlMemoryMiB": {"rss": round(control.memory()[0], 1), "peak": round(control.memory()[1], 1)},
        }
        print(json.dumps(report, indent=2))
        for conn in open_holds:
            conn.close()
    finally:
        for p in reversed(processes):
            p.stop()


if __name__ == "__main__":
    main()
