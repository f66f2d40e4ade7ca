"""Storage planning: TVM's pool sizing and the liveness planner for graphs without ids."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.runtime.graph_executor import parse_graph, plan_storage
from tvmrt.runtime.graph_executor.storage import assign_storage_ids
from tvmrt.testing import GraphBuilder, graphs, numpy_op_library


def test_pool_is_max_of_its_entries_rounded_to_four_bytes():
    b = GraphBuilder()
    x = b.input("x", (3,), "int8", storage_id=2)
    (y,) = b.op("a", "copy", [x], [(5,)], "int8", storage_ids=[0])
    (z,) = b.op("b", "copy", [y], [(3,)], "int8", storage_ids=[1])
    (w,) = b.op("c", "copy", [z], [(3,)], "int8", storage_ids=[0])
    b.output(w)
    plan = plan_storage(parse_graph(b.to_json()), 1)
    assert [p.nbytes for p in plan.pools] == [5, 3, 3]
    assert [p.alloc_bytes for p in plan.pools] == [8, 4, 4]
    assert plan.total_bytes == 16
    assert plan.num_pools == 3


def test_unused_storage_id_gets_an_empty_pool():
    b = GraphBuilder()
    x = b.input("x", (2,), storage_id=2)
    b.output(x)
    plan = plan_storage(parse_graph(b.to_json()), 1)
    assert [p.nbytes for p in plan.pools] == [0, 0, 8]


def test_bool_and_sub_byte_take_one_byte_per_element():
    b = GraphBuilder()
    x = b.input("x", (10,), "bool")
    b.output(x)
    plan = plan_storage(parse_graph(b.to_json()), 1)
    assert plan.pools[0].nbytes == 10


def test_entries_are_views_of_their_pool(artifacts: Path):
    mod = graph_executor.create(graphs.reshape_nop(), numpy_op_library(), runtime.cpu())
    ex = mod.executor
    sids = ex.plan.entry_storage
    ptrs = [e.data_ptr for e in ex.entries]
    for a in range(len(sids)):
        for b in range(len(sids)):
            assert (ptrs[a] == ptrs[b]) == (sids[a] == sids[b])
    assert all(p % 64 == 0 for p in ptrs)


def test_mobilenet_plan_reuses_memory(artifacts: Path):
    g = parse_graph((artifacts / "mobilenet_v1" / "deploy_graph.json").read_text())
    plan = plan_storage(g, 1)
    naive = sum((g.entry_nbytes(e) + 3) // 4 * 4 for e in range(g.num_entries))
    assert plan.num_pools < g.num_entries
    assert plan.total_bytes < naive


def _random_chain(ops: list[tuple[int, int]]) -> GraphBuilder:
    """A graph from (input choice, size) pairs, every op reading two earlier entries."""
    b = GraphBuilder()
    refs = [b.input("x", (4,))]
    for i, (pick, _size) in enumerate(ops):
        a = refs[pick % len(refs)]
        c = refs[(pick // 7) % len(refs)]
        (r,) = b.op(f"op{i}", "add", [a, c], [(4,)])
        refs.append(r)
    b.output(refs[-1])
    return b


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 8)), min_size=1, max_size=25))
def test_liveness_plan_never_overlaps_live_tensors(ops):
    b = _random_chain(ops)
    doc = b.to_dict(with_storage_ids=False)
    text = json.dumps(doc)
    mod = graph_executor.create(text, numpy_op_library(), runtime.cpu())
    ref = graph_executor.create(b.to_json(), numpy_op_library(), runtime.cpu())  # private pools
    x = np.random.uniform(size=4).astype("float32")
    mod.run(x=x)
    ref.run(x=x)
    np.testing.assert_allclose(mod.get_output(0).numpy(), ref.get_output(0).numpy(), rtol=1e-6)
    # invariant: two entries live at the same time never share a pool
    g = parse_graph(text)
    sids = mod.storage_plan.entry_storage
    last = {}
    for nid, node in enumerate(g.nodes):
        for r in node.inputs:
            last[g.entry_id(r.node_id, r.index)] = nid
    heads = {g.entry_id(h.node_id, h.index) for h in g.heads}
    born = {g.entry_id(nid): nid for nid in range(len(g.nodes))}
    for e1 in range(g.num_entries):
        for e2 in range(e1 + 1, g.num_entries):
            if sids[e1] != sids[e2]:
                continue
            end1 = len(g.nodes) if e1 in heads else last.get(e1, born[e1])
            assert born[e2] >= end1, (e1, e2, sids)


def _reference_best_fit(nbytes, producers, heads, devices=None):
    """Issue 11 item 12's reference: the planner's rule written as a plain linear scan."""
    last = [-1] * len(nbytes)
    for nid, (_, inputs, _, _) in enumerate(producers):
        for e in inputs:
            last[e] = max(last[e], nid)
    sids, sizes, pool_dev, pinned, free = [-1] * len(nbytes), [], [], set(), []
    count: dict[int, int] = {}
    releases: dict[int, list[int]] = {}
    dev = (lambda e: devices[e]) if devices else (lambda e: 0)
    for nid, (outputs, inputs, is_null, is_nop) in enumerate(producers):
        for k, eid in enumerate(outputs):
            if is_null or eid in heads:
                sid = len(sizes)
                sizes.append(nbytes[eid])
                pool_dev.append(dev(eid))
                pinned.add(sid)
            elif is_nop and k < len(inputs):
                sid = sids[inputs[k]]
            else:
                cands = [s for s in free if pool_dev[s] == dev(eid)]
                fit = [s for s in cands if sizes[s] >= nbytes[eid]]
                pick = min(fit, key=lambda s: sizes[s]) if fit else None
                if pick is None and cands:
                    pick = max(cands, key=lambda s: sizes[s])
                if pick is None:
                    sid = len(sizes)
                    sizes.append(nbytes[eid])
                    pool_dev.append(dev(eid))
                else:
                    free.remove(pick)
                    sid = pick
                sizes[sid] = max(sizes[sid], nbytes[eid])
            sids[eid] = sid
            count[sid] = count.get(sid, 0) + 1
            releases.setdefault(max(last[eid], nid), []).append(sid)
        for sid in releases.pop(nid, []):
            count[sid] -= 1
            if count[sid] == 0 and sid not in pinned:
                free.append(sid)
    return sids


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_planner_matches_a_linear_scan_reference(data):
    n = data.draw(st.integers(1, 25))
    nbytes: list[int] = []
    producers = []
    for nid in range(n):
        k = data.draw(st.integers(1, 2))
        outs = list(range(len(nbytes), len(nbytes) + k))
        nbytes += [data.draw(st.sampled_from([4, 8, 8, 16, 100])) for _ in range(k)]
        ins = [data.draw(st.integers(0, outs[0] - 1)) for _ in range(3)] if outs[0] else []
        ins = ins[: data.draw(st.integers(0, 3))]
        producers.append(
            (outs, ins, nid == 0 or data.draw(st.booleans()), data.draw(st.booleans()))
        )
    heads = [data.draw(st.integers(0, len(nbytes) - 1))]
    devices = data.draw(
        st.none() | st.lists(st.sampled_from([1, 2]), min_size=len(nbytes), max_size=len(nbytes))
    )
    got = assign_storage_ids(nbytes, producers, heads, devices)
    assert got == _reference_best_fit(nbytes, producers, heads, devices)


def test_planner_reuses_pools_freed_together():
    # 200 kernels read x, one joins them, a chain of 200 follows: the chain takes pools
    # from the 200 freed at once (the case that was quadratic) instead of making new ones.
    b = GraphBuilder()
    x = b.input("x", (4,))
    fan = [b.op(f"f{i}", "relu", [x], [(4,)])[0] for i in range(200)]
    (ref,) = b.op("join", "add", fan, [(4,)])
    for i in range(200):
        (ref,) = b.op(f"c{i}", "relu", [ref], [(4,)])
    b.output(ref)
    plan = plan_storage(parse_graph(b.to_json(with_storage_ids=False)), 1)
    assert plan.num_pools == 1 + 200 + 1 + 1  # x, the fan, the join, the output
