"""The simulator's per-placement pricing loops, compiled with Numba (`SimulatedBackend`'s inner kernel).

`price_batch` cuts each placement of a batch into HETERO submodels (`placement_gym.backends.simulated.HeteroCutter`
describes the rule) and sums what the cost model charges per placement: compute seconds per device, and the
tensors crossing submodels (once per (producer op, consumer submodel), the lowest-numbered edge of each such
pair) with their seconds, bytes and per-link seconds. It works one placement at a time with plain loops over the
ops and edges (a union-find, then HETERO's cycle-splitting rounds on descendant bitsets), so its cost is a few
microseconds per placement of a model, whether it is called with one placement (`SimulatedBackend.measure`) or a
batch (`measure_many`).

Exactness: every sum adds the same numbers in the same order as the array formulation it replaced (compute: op
order; crossings: by producer op, then by consumer submodel label), and Numba compiles without fast-math, so the
prices are bit for bit those of that formulation (and of each placement alone: nothing depends on the batch).

Compiled on first use and cached on disk next to this file (``cache=True``; Numba falls back to its own cache
directory where that is not writable), so a new process loads it in well under a second.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _find(parent, a):
    while parent[a] != a:
        parent[a] = parent[parent[a]]  # path halving: parents stay smaller than their children
        a = parent[a]
    return a


@njit(cache=True, nogil=True)
def _components(n, src, dst, keep, labels):
    """Label each of `n` ops with the smallest op index of its component over the edges ``keep[k]``."""
    for i in range(n):
        labels[i] = i
    for k in range(src.size):
        if keep[k]:
            a = _find(labels, src[k])
            b = _find(labels, dst[k])
            if a < b:
                labels[b] = a
            elif b < a:
                labels[a] = b
    # Every parent has a smaller index, so one pass in index order resolves every op to its root.
    for i in range(n):
        labels[i] = labels[labels[i]]


@njit(cache=True, nogil=True)
def _first_member_after(members, lo, hi, op):
    """The first index of ``members[lo:hi]`` (one subgraph's ops, in index order) holding an op after `op`; `hi`
    where none is: a binary search, as a subgraph may hold thousands of ops."""
    while lo < hi:
        mid = (lo + hi) // 2
        if members[mid] <= op:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _cut(device, src, dst, descendants, split_cycles, keep, labels, late, has_exit, reach, last, exits, members,
         member_start, pair_order):
    """HETERO's cut of one placement into `labels` (smallest op index of each op's submodel).

    Scratch arrays (any contents on entry): `keep` (E,) bool, `late` / `has_exit` (N,) bool, `reach` (N, W)
    uint64, `last` / `members` / `pair_order` (N,), `member_start` (N + 1,), `exits` (E,) int64."""
    n, e = device.size, src.size
    for k in range(e):
        keep[k] = device[src[k]] == device[dst[k]]
    _components(n, src, dst, keep, labels)
    words = descendants.shape[1]
    while split_cycles:
        # Each subgraph's exits (the edges leaving it: HETERO's "this subgraph feeds another") that can lead back
        # into it. Ops are in topological order, so an exit u -> x reaches only ops after x: an exit whose x comes
        # after its subgraph's last op reaches none of them. Most exits are such when subgraphs are local (small,
        # or runs of consecutive ops), and when no exit is left the cut is final without touching a bitset.
        for i in range(n):
            last[labels[i]] = i  # ops in index order: the last write is the subgraph's last op
        count = 0
        for k in range(e):
            owner = labels[src[k]]
            exits[count] = k
            count += (owner != labels[dst[k]]) & (dst[k] < last[owner])  # branch-free: random placements
        if count == 0:
            break
        # An op is late when it is reachable from such an exit of its own subgraph. Two equivalent ways, the
        # cheaper one is used: OR the descendant rows of each subgraph's exits (~ exits x W words), or test each
        # (exit, later op of the exit's subgraph) pair (~ pairs: few when subgraphs are local, as in big graphs).
        pairs = 0
        if words > 32:
            # Ops grouped by subgraph, in topological (index) order within (a counting sort by label).
            for i in range(n + 1):
                member_start[i] = 0
            for i in range(n):
                member_start[labels[i] + 1] += 1
            for i in range(n):
                member_start[i + 1] += member_start[i]
            for i in range(n):
                pair_order[i] = member_start[i]  # next free slot of subgraph i
            for i in range(n):
                members[pair_order[labels[i]]] = i
                pair_order[labels[i]] += 1
            for j in range(count):
                k = exits[j]
                owner = labels[src[k]]
                # Members of `owner` after dst[k] (only they can be its descendants).
                lo = _first_member_after(members, member_start[owner], member_start[owner + 1], dst[k])
                pairs += member_start[owner + 1] - lo
                if pairs >= count * words:
                    break
        if words > 32 and pairs < count * words:
            for i in range(n):
                late[i] = False
            for j in range(count):
                k = exits[j]
                owner = labels[src[k]]
                d = dst[k]
                lo = _first_member_after(members, member_start[owner], member_start[owner + 1], d)
                for jj in range(lo, member_start[owner + 1]):
                    v = members[jj]
                    if (descendants[d, v >> 6] >> np.uint64(v & 63)) & np.uint64(1):
                        late[v] = True
        else:  # OR each subgraph's exits' descendant rows into its own row (only subgraphs with exits have one)
            for i in range(n):
                has_exit[i] = False
            for j in range(count):
                k = exits[j]
                owner = labels[src[k]]
                d = dst[k]
                if has_exit[owner]:
                    for w in range(words):
                        reach[owner, w] |= descendants[d, w]
                else:
                    has_exit[owner] = True
                    for w in range(words):
                        reach[owner, w] = descendants[d, w]
            for v in range(n):
                owner = labels[v]
                late[v] = has_exit[owner] and ((reach[owner, v >> 6] >> np.uint64(v & 63)) & np.uint64(1)) != 0
        # Cut the edges inside a subgraph that lead from an op not downstream of one of its exits to one that is:
        # what HETERO's split_cyclic_dependencies promotes to subgraph inputs.
        cuts = 0
        for k in range(e):
            cut = keep[k] & ~late[src[k]] & late[dst[k]]
            keep[k] = keep[k] & ~cut
            cuts += cut
        if cuts == 0:
            break  # no subgraph depends on itself through another: the cut is final
        _components(n, src, dst, keep, labels)


@njit(cache=True, nogil=True)
def price_batch(placements, cut_all, op_seconds, edge_seconds, edge_bytes, src, dst, out_edges,
                descendants, split_cycles, n_devices, want_labels):
    """Cut and sum each placement of `placements` ((B, N) int64 device per op, validated).

    Args:
        cut_all: cut every placement; else only those on two or more devices are cut (a one-device placement is
            one submodel with no crossings).
        op_seconds: (N, D) float64; edge_seconds: (D * D, E) float64 (row ``a * D + b``); edge_bytes: (E,) float64.
        src, dst: (E,) int64 the graph's edges (ops in topological order); out_edges (E,) int64 the edge
            indices by producer op (``argsort(src, kind="stable")``: each op's outgoing edges in ascending order).
        descendants: (N, W) uint64 reachability bitsets (a (1, 1) dummy when not `split_cycles`).
        want_labels: fill `labels` (else it is left (0, N)).

    Returns:
        n_submodels (B,) int64, labels (B, N) int64 (or (0, N)), compute (B, D) seconds per device, transfer_s,
        transfer_bytes, n_transfers (B,) float64, link_s (B, D * D) seconds of crossing tensors per device pair,
        submodels_per_device (B, D) float64.
    """
    b, n = placements.shape
    d = n_devices
    e = src.size
    n_submodels = np.ones(b, dtype=np.int64)
    labels_out = np.zeros((b if want_labels else 0, n), dtype=np.int64)
    compute = np.zeros((b, d))
    transfer_s = np.zeros(b)
    transfer_bytes = np.zeros(b)
    n_transfers = np.zeros(b)
    link_s = np.zeros((b, d * d))
    per_device = np.zeros((b, d))
    keep = np.empty(e, dtype=np.bool_)
    labels = np.empty(n, dtype=np.int64)
    late = np.empty(n, dtype=np.bool_)
    has_exit = np.empty(n, dtype=np.bool_)
    reach = np.empty((n if split_cycles else 1, descendants.shape[1]), dtype=np.uint64)
    last = np.empty(n, dtype=np.int64)
    exits = np.empty(e, dtype=np.int64)
    members = np.empty(n, dtype=np.int64)
    member_start = np.empty(n + 1, dtype=np.int64)
    pair_order = np.empty(n, dtype=np.int64)
    # Consumer submodel -> the last (placement, producer op) stamp that sent it a tensor.
    seen_label = np.full(n, -1, dtype=np.int64)
    stamp = 0
    crossing_label = np.empty(n, dtype=np.int64)  # one producer's crossings: consumer labels, lowest edges
    crossing_edge = np.empty(n, dtype=np.int64)
    crossing = np.empty(e, dtype=np.int64)  # one placement's crossing edges
    for r in range(b):
        device = placements[r]
        split = cut_all
        for i in range(n):
            compute[r, device[i]] += op_seconds[i, device[i]]
            split |= device[i] != device[0]
        if not split:
            per_device[r, device[0]] = 1.0
            if want_labels:
                for i in range(n):
                    labels_out[r, i] = 0
            continue
        _cut(device, src, dst, descendants, split_cycles, keep, labels, late, has_exit, reach, last, exits, members,
             member_start, pair_order)
        count = 0
        for i in range(n):
            if labels[i] == i:
                count += 1
                per_device[r, device[i]] += 1.0
        n_submodels[r] = count
        if want_labels:
            for i in range(n):
                labels_out[r, i] = labels[i]
        # Crossing tensors, by producer op, then consumer submodel label (ascending), the lowest edge of each.
        # First the edges that cross at all, in producer order with each producer's edges ascending (the CSR
        # order; a branch-free scan: most edges stay inside their submodel), then per producer the first edge
        # to each consumer label, kept sorted by label with an insertion sort (a producer feeds a few at most).
        count = 0
        for j in range(e):
            k = out_edges[j]
            crossing[count] = k
            count += labels[src[k]] != labels[dst[k]]
        seconds_sum, bytes_sum, crossings = 0.0, 0.0, 0.0
        j = 0
        while j < count:
            s = src[crossing[j]]
            found = 0
            while j < count and src[crossing[j]] == s:
                k = crossing[j]
                j += 1
                lab = labels[dst[k]]
                if seen_label[lab] != stamp:
                    seen_label[lab] = stamp
                    at = found
                    while at > 0 and crossing_label[at - 1] > lab:
                        crossing_label[at] = crossing_label[at - 1]
                        crossing_edge[at] = crossing_edge[at - 1]
                        at -= 1
                    crossing_label[at] = lab
                    crossing_edge[at] = k
                    found += 1
            stamp += 1  # a new (placement, producer): every seen_label entry is stale, with no reset pass
            for jj in range(found):
                k = crossing_edge[jj]
                pair = device[s] * d + device[dst[k]]
                seconds = edge_seconds[pair, k]
                seconds_sum += seconds
                bytes_sum += edge_bytes[k]
                crossings += 1.0
                link_s[r, pair] += seconds
        transfer_s[r], transfer_bytes[r], n_transfers[r] = seconds_sum, bytes_sum, crossings
    return n_submodels, labels_out, compute, transfer_s, transfer_bytes, n_transfers, link_s, per_device
