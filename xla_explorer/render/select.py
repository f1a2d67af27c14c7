"""Views of part of a large graph: the neighbourhood of a node, the paths between two.

Both take a ``GraphModel`` and return a smaller one.  Where a kept node had neighbours
that were cut off, a small "… N more" node stands for them (one above the node for cut
operands, one below for cut users), so the view says that it is a part.
"""
from collections import deque

from .model import Edge, GraphModel, Node


def _flow_edges(model):
    """(src, dst) in the direction data flows: operands to users, a callee's root to its caller."""
    for e in model.edges:
        if e.kind == "operand":
            yield e.src, e.dst
        elif e.kind == "call":
            yield e.dst, e.src


def neighbourhood(model, name, radius=2):
    """The nodes at most ``radius`` edges (either direction, calls included) from ``name``."""
    if radius < 0:
        raise ValueError(f"radius must be >= 0, got {radius}")
    start = model.node(name).id
    adjacent = {}
    for a, b in _flow_edges(model):
        adjacent.setdefault(a, set()).add(b)
        adjacent.setdefault(b, set()).add(a)
    distance = {start: 0}
    queue = deque([start])
    while queue:
        nid = queue.popleft()
        if distance[nid] == radius:
            continue
        for other in adjacent.get(nid, ()):
            if other not in distance:
                distance[other] = distance[nid] + 1
                queue.append(other)
    title = f"{model.title}  (around {name}, radius {radius})"
    return subgraph(model, set(distance), title)


def paths(model, a, b):
    """The nodes on any path of data flow from ``a`` to ``b`` (or from ``b`` to ``a``)."""
    src, dst = model.node(a).id, model.node(b).id
    forward, backward = {}, {}
    for x, y in _flow_edges(model):
        forward.setdefault(x, set()).add(y)
        backward.setdefault(y, set()).add(x)

    def reach(start, step):
        seen, stack = {start}, [start]
        while stack:
            for other in step.get(stack.pop(), ()):
                if other not in seen:
                    seen.add(other)
                    stack.append(other)
        return seen

    keep = reach(src, forward) & reach(dst, backward)
    if not keep:
        keep = reach(dst, forward) & reach(src, backward)
        if not keep:
            raise ValueError(f"no path of data flow between {a!r} and {b!r} (either way)")
        a, b = b, a
    return subgraph(model, keep, f"{model.title}  (paths {a} → {b})")


def subgraph(model, keep, title=None):
    """The model restricted to node ids ``keep``, with "… N more" nodes for what was cut."""
    out = GraphModel(title=title if title is not None else model.title)
    out.nodes = [n for n in model.nodes if n.id in keep]
    out.edges = [e for e in model.edges if e.src in keep and e.dst in keep]
    cut_in, cut_out = {}, {}  # kept node id -> names of cut neighbours
    name_of = {n.id: n.name for n in model.nodes}
    for e in model.edges:
        if e.kind not in ("operand", "call"):
            continue
        src, dst = (e.src, e.dst) if e.kind == "operand" else (e.dst, e.src)  # data flow
        if src in keep and dst not in keep:
            cut = cut_out.setdefault(src, [])
            other = name_of[dst]
        elif dst in keep and src not in keep:
            cut = cut_in.setdefault(dst, [])
            other = name_of[src]
        else:
            continue
        if other not in cut:  # an operand used twice is one cut neighbour
            cut.append(other)
    by_id = {n.id: n for n in out.nodes}
    for side, cut in (("in", cut_in), ("out", cut_out)):
        for nid, names in cut.items():
            node = by_id[nid]
            more = Node(f"{nid}_more_{side}", "more", "…", category=node.category,
                        cluster=node.cluster, tooltip=("cut off: " + ", ".join(names[:20]) +
                                                       (" …" if len(names) > 20 else "")))
            out.nodes.append(more)
            label = f"+{len(names)} more"
            out.edges.append(Edge(more.id, nid, "more", label) if side == "in" else Edge(nid, more.id, "more", label))
    # clusters holding kept nodes, and the clusters around them
    wanted = {n.cluster for n in out.nodes if n.cluster}
    parents = {c.id: c.parent for c in model.clusters}
    for cid in list(wanted):
        while parents.get(cid):
            cid = parents[cid]
            wanted.add(cid)
    out.clusters = [c for c in model.clusters if c.id in wanted]
    out.update_legend()
    return out
