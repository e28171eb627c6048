"""General topologies: ``[topology]`` hosts, routers and ``[[topology.links]]``,
each flow's ``src`` / ``dst`` / ``path``, ``[[events]]`` and ``[controller]``
→ the ``network``, per-flow paths, ``events`` and ``controller`` of the run
config (docs/interfaces.md §1, docs/topology.md).

Decisions written down here:

* Directed link names: a link ``{name = "N", between = ["A", "B"]}`` is
  ``N`` (A → B) and ``N/back`` (B → A); without a name ``A-B`` and ``B-A``.
  The network lists each link's A → B direction, then its B → A direction,
  in file order (link *i* of that list draws from random stream *i* + 1).
* A node pair has one link; a second ``[[topology.links]]`` entry for the
  same pair (either order) is an error. A link name is not all digits:
  ``topology.links.3`` in a sweep key is the link at index 3.
* Default path: the least total one-way delay from src to dst; among equal
  delays the fewest hops, then the first sequence of node names in
  alphabetical order. Hosts do not forward: only routers are inside a path.
  The return path is the data path reversed unless ``return_path`` is given.
* A path in ``[[events]]`` or the controller's ``alternative`` is a whole
  path (src → dst) or a part of one: it replaces the flow's current path
  between its first and last node, which must both be on it, in that order.
  A flow whose return path is its data path reversed keeps it so; an
  explicit return path changes only with an event's ``return_path``.
* Buffers: a direction that touches a host is a *pipe* (no queue, no drops,
  not sampled: a host's NIC) unless the link gives a ``buffer`` or a
  ``qdisc`` for it. A link's ``loss`` is each of its directions' that
  queues; a loss that reaches only pipes (a link of two pipes, or a pipe's
  own ``back.loss``) is an error (the core refuses it), and
  ``topology.links.*.loss`` leaves such links out. Any other direction queues, by
  default one BDP (or the discipline's Linux limit, as at the dumbbell's
  bottleneck) of its rate and its RTT: ``bdp_rtt`` or the largest base RTT
  (data path + return path delays) of any path a flow may take across it
  (at start, after an event, on the controller's alternative); a link that
  no flow crosses uses twice its delay.
* Controller candidates: the bulk and transfer flows (of ``flows``, when
  given) whose path at the start crosses the watched link and contains the
  alternative's first and last node. A flow that ``flows`` names by its
  number and is not one, or a group none of whose flows is one, is an
  error; of a group, the flows that are candidates move.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import qdisc, units
from .model import HEADER_BYTES, Controller, Event, Flow, StudyFile, stall_fields
from .sweep import FieldError, dotted

NAME = re.compile(r"^[A-Za-z0-9_-]+$")
NAME_ALLOWED = "letters, digits, '_' and '-'"


@dataclass
class DirLink:
    """One direction of a ``[[topology.links]]`` entry, its settings merged."""

    name: str
    src: str
    dst: str
    entry: int  # index in topology.links
    back: bool
    rate: int
    delay: int
    loss: float
    buffer: Optional[units.Buffer]
    qdisc: Optional[qdisc.Qdisc]
    bdp_rtt: Optional[int]
    jitter: int
    stalls: Optional[list]  # model.Stalls, one per overlaid pause process
    back_fields: tuple = ()  # the settings the link's back table gives (B → A only)

    @property
    def loc(self) -> tuple:
        return ("topology", "links", self.entry)

    def field_loc(self, name: str) -> tuple:
        """Where the setting ``name`` of this direction is written (in back only when back gives it)."""
        return self.loc + (("back", name) if self.back and name in self.back_fields else (name,))


@dataclass
class Net:
    hosts: list[str]
    routers: list[str]
    links: list[DirLink] = field(default_factory=list)
    by_ends: dict[tuple[str, str], DirLink] = field(default_factory=dict)
    by_name: dict[str, DirLink] = field(default_factory=dict)

    @property
    def nodes(self) -> list[str]:
        return self.hosts + self.routers

    def is_host(self, n: str) -> bool:
        return n in self.hosts

    def is_pipe(self, d: DirLink) -> bool:
        """A direction that touches a host and gives no buffer or qdisc: the core's pipe (no queue)."""
        return (self.is_host(d.src) or self.is_host(d.dst)) and d.buffer is None and d.qdisc is None

    def neighbours(self, n: str) -> str:
        near = sorted(b for (a, b) in self.by_ends if a == n)
        return f"{n} links to {', '.join(near)}" if near else f"{n} has no links"

    def delay(self, nodes: list[str]) -> int:
        return sum(self.by_ends[(a, b)].delay for a, b in zip(nodes, nodes[1:]))

    def link_names(self, nodes: list[str]) -> list[str]:
        return [self.by_ends[(a, b)].name for a, b in zip(nodes, nodes[1:])]


@dataclass
class Route:
    """A flow's data path and return path, as node lists."""

    path: list[str]
    back: list[str]

    @property
    def mirrored(self) -> bool:
        return self.back == self.path[::-1]


# ------------------------------------------------------------------ nodes and links


def build(m: StudyFile) -> Net:
    """Check the nodes and links of a general topology."""
    topo = m.topology
    for name in ("senders", "access", "bottleneck", "reverse"):
        if getattr(topo, name) is not None:
            raise FieldError(("topology", name), "not part of a general topology: the study gives "
                             "[[topology.links]]", FieldError.NO_VALUE,
                             "either a dumbbell (senders, access, bottleneck, reverse) or hosts, routers and links",
                             related=("topology.links",))
    if not topo.hosts:
        raise FieldError(("topology", "hosts"), "a general topology needs its hosts",
                         topo.hosts if topo.hosts is not None else FieldError.NO_VALUE,
                         "an array of host names, e.g. ['a', 'b']", related=("topology.links",))
    net = Net(list(topo.hosts), list(topo.routers))
    seen: dict[str, tuple] = {}
    for kind, names in (("hosts", net.hosts), ("routers", net.routers)):
        for i, n in enumerate(names):
            loc = ("topology", kind, i)
            if not NAME.match(n):
                raise FieldError(loc, "not a valid node name", n, NAME_ALLOWED)
            if n in seen:
                raise FieldError(loc, f"node '{n}' is named twice (also {dotted(seen[n])})", n,
                                 "each node name once, in hosts or routers")
            seen[n] = loc
    if not topo.links:
        raise FieldError(("topology", "links"), "must not be empty", FieldError.NO_VALUE,
                         "[[topology.links]] tables with between = ['A', 'B'] and rate = '...'")
    pairs: dict[frozenset, int] = {}
    for i, ln in enumerate(topo.links):
        loc = ("topology", "links", i)
        ends = ln.between
        if len(ends) != 2:
            raise FieldError(loc + ("between",), f"must name exactly two nodes, not {len(ends)}", ends,
                             "two node names, e.g. ['r1', 'r2']")
        a, b = ends
        for j, n in enumerate(ends):
            if n not in seen:
                raise FieldError(loc + ("between", j), f"unknown node '{n}'", n,
                                 "a node of topology.hosts or topology.routers: " + ", ".join(net.nodes),
                                 related=("topology.hosts", "topology.routers"))
        if a == b:
            raise FieldError(loc + ("between",), "a link joins two different nodes", ends,
                             "two different node names")
        if ln.name is not None and not NAME.match(ln.name):
            raise FieldError(loc + ("name",), "not a valid link name", ln.name, NAME_ALLOWED)
        if ln.name is not None and ln.name.isdigit():
            # "topology.links.3.rate" would be link index 3, not the link named "3"
            raise FieldError(loc + ("name",), "an all-digit link name reads as a link index in sweep keys, "
                             "cases and profiles", ln.name, NAME_ALLOWED + ", not all digits, e.g. 'l" + ln.name + "'")
        fwd, back = _directions(i, ln)
        # The link's own loss is each direction's that queues (a host's NIC, a
        # pipe, loses nothing); it is an error only where it reaches no queue
        # (the back direction takes it unless its table sets its own).
        reached = [fwd] + ([back] if "loss" not in back.back_fields else [])
        if any(not net.is_pipe(d) for d in reached):
            for d in reached:
                if net.is_pipe(d):
                    d.loss = 0.0
        for d in (fwd, back):
            if d.loss and net.is_pipe(d):
                # the core refuses it in every run (netcore LinkConfig::check_in_network)
                why = (f" (the link's loss would go to {back.name}, which queues, but its back table sets its own)"
                       if d is fwd and "loss" in back.back_fields and not net.is_pipe(back) else "")
                raise FieldError(d.field_loc("loss"), f"{d.name} is a pipe (a host's link without a buffer or a "
                                 f"qdisc: no queue, no drops), which cannot lose packets{why}", f"{d.loss:.6g}",
                                 f"'0%', or a buffer or a qdisc {'in the back table' if d.back else 'on the link'} "
                                 "so that it queues and can drop")
        key = frozenset(ends)
        if key in pairs:
            j = pairs[key]
            _twice(net, loc, ln, j, fwd, back)
        pairs[key] = i
        for d in (fwd, back):
            if d.name in net.by_name:
                other = net.by_name[d.name]
                raise FieldError(loc + (("name",) if ln.name is not None else ("between",)),
                                 f"link name '{d.name}' is taken by topology.links.{other.entry}",
                                 ln.name if ln.name is not None else ends, "a name used once")
            net.by_name[d.name] = d
            net.by_ends[(d.src, d.dst)] = d
            net.links.append(d)
    for n, loc in seen.items():
        if not any(n in k for k in pairs):
            raise FieldError(loc, f"node '{n}' has no link", n, "a node that some [[topology.links]] entry joins",
                             related=("topology.links",))
    return net


def _directions(i: int, ln: Any) -> tuple[DirLink, DirLink]:
    a, b = ln.between
    fname = ln.name if ln.name is not None else f"{a}-{b}"
    bname = f"{ln.name}/back" if ln.name is not None else f"{b}-{a}"
    fwd = DirLink(fname, a, b, i, False, ln.rate, ln.delay, ln.loss, ln.buffer, ln.qdisc, ln.bdp_rtt, ln.jitter,
                  ln.stalls)
    keys = ("rate", "delay", "loss", "buffer", "qdisc", "bdp_rtt", "jitter", "stalls")
    given = tuple(k for k in keys if ln.back is not None and getattr(ln.back, k) is not None)
    back = DirLink(bname, b, a, i, True, *(getattr(ln.back if k in given else ln, k) for k in keys),
                   back_fields=given)
    return fwd, back


def _twice(net: Net, loc: tuple, ln: Any, j: int, fwd: DirLink, back: DirLink) -> None:
    first = {(d.src, d.dst): d for d in net.links if d.entry == j}
    for d in (fwd, back):
        o = first[(d.src, d.dst)]
        if o.rate != d.rate:
            where = d.field_loc("rate")
            raise FieldError(where, f"the link between {d.src} and {d.dst} is given twice (also "
                             f"topology.links.{j}) with different rates for {d.src} → {d.dst} "
                             f"({units.format_rate(o.rate)} and {units.format_rate(d.rate)})",
                             units.format_rate(d.rate),
                             f"one [[topology.links]] entry per node pair; the {d.src} → {d.dst} direction's "
                             "own values in its back table", related=(f"topology.links.{j}",))
    raise FieldError(loc + ("between",), f"the link between {fwd.src} and {fwd.dst} is given twice (also "
                     f"topology.links.{j})", ln.between, "one [[topology.links]] entry per node pair",
                     related=(f"topology.links.{j}",))


def pipe_only(doc: Any, entry: int, rest: tuple) -> bool:
    """Whether setting ``rest`` (``('loss',)`` or ``('back', 'loss')``) of
    ``topology.links.<entry>`` in the document reaches only pipes, which
    cannot lose packets: ``topology.links.*.loss`` leaves such links out.
    Anything not clearly so is kept (the validation names what is wrong)."""
    if rest not in (("loss",), ("back", "loss")):
        return False
    topo = doc.get("topology") if isinstance(doc, dict) else None
    lns = topo.get("links") if isinstance(topo, dict) else None
    if not isinstance(lns, list) or not 0 <= entry < len(lns) or not isinstance(lns[entry], dict):
        return False
    e = lns[entry]
    hosts = topo.get("hosts")
    ends = e.get("between")
    if not isinstance(hosts, list) or not isinstance(ends, list) or not any(n in hosts for n in ends):
        return False
    back = e.get("back") if isinstance(e.get("back"), dict) else {}
    fwd_queues = "buffer" in e or "qdisc" in e
    back_queues = fwd_queues or "buffer" in back or "qdisc" in back
    if rest == ("back", "loss"):
        return not back_queues
    return not fwd_queues and ("loss" in back or not back_queues)


# ------------------------------------------------------------------ paths


def check_path(net: Net, nodes: list[str], src: str, dst: str, loc: tuple, related: tuple = ()) -> list[str]:
    """A whole path src → dst as written: the same list back, or FieldError at ``loc``."""
    if len(nodes) < 2:
        raise FieldError(loc, "a path has at least two nodes", nodes, f"nodes from {src} to {dst}")
    for n in nodes:
        if n not in net.nodes:
            raise FieldError(loc, f"unknown node '{n}'", nodes, "nodes of topology.hosts and topology.routers: "
                             + ", ".join(net.nodes), related=related)
    if nodes[0] != src or nodes[-1] != dst:
        raise FieldError(loc, f"must go from {src} to {dst} (it goes from {nodes[0]} to {nodes[-1]})", nodes,
                         f"a path starting at {src} and ending at {dst}", related=related)
    _check_steps(net, nodes, loc, related)
    return nodes


def _check_steps(net: Net, nodes: list[str], loc: tuple, related: tuple) -> None:
    for i, n in enumerate(nodes):
        if n in nodes[:i]:
            raise FieldError(loc, f"visits {n} twice: a path has no cycles", nodes,
                             "a path that visits each node once", related=related)
        if 0 < i < len(nodes) - 1 and net.is_host(n):
            raise FieldError(loc, f"passes through host {n}: hosts do not forward", nodes,
                             "routers between the two ends", related=related)
    for a, b in zip(nodes, nodes[1:]):
        if (a, b) not in net.by_ends:
            raise FieldError(loc, f"no link between {a} and {b}", nodes,
                             f"a path along [[topology.links]] ({net.neighbours(a)})",
                             related=related + ("topology.links",))


def shortest(net: Net, src: str, dst: str) -> Optional[list[str]]:
    """Least delay, then fewest hops, then the alphabetically first node sequence; None when unreachable."""
    heap: list[tuple[int, int, tuple[str, ...]]] = [(0, 0, (src,))]
    done: set[str] = set()
    while heap:
        delay, hops, path = heapq.heappop(heap)
        u = path[-1]
        if u in done:
            continue
        done.add(u)
        if u == dst:
            return list(path)
        if u != src and net.is_host(u):
            continue
        for (a, b), d in net.by_ends.items():
            if a == u and b not in done:
                heapq.heappush(heap, (delay + d.delay, hops + 1, path + (b,)))
    return None


def splice(net: Net, current: list[str], part: list[str], loc: tuple, what: str, related: tuple = ()) -> list[str]:
    """``current`` with ``part`` in place of its stretch between part's first and last node."""
    if len(part) < 2:
        raise FieldError(loc, "a path has at least two nodes", part, "nodes such as ['r1', 'r3', 'r2']")
    for n in part:
        if n not in net.nodes:
            raise FieldError(loc, f"unknown node '{n}'", part, "nodes of topology.hosts and topology.routers: "
                             + ", ".join(net.nodes), related=related)
    first, last = part[0], part[-1]
    if first not in current or last not in current or current.index(first) >= current.index(last):
        raise FieldError(loc, f"{what}'s path {' → '.join(current)} does not go from {first} to {last}", part,
                         f"a whole path {current[0]} → {current[-1]}, or one between two nodes of that path "
                         "in its order", related=related)
    new = current[: current.index(first)] + part + current[current.index(last) + 1:]
    _check_steps(net, new, loc, related)
    return new


# ------------------------------------------------------------------ flows


def flow_route(net: Net, f: Flow, i: int) -> Route:
    """Check a [[flows]] table's src, dst, path and return_path; its route at the start."""
    loc = ("flows", i)
    if "sender" in f.model_fields_set:
        raise FieldError(loc + ("sender",), "a general topology names hosts: use src and dst", f.sender,
                         "src = 'HOST', dst = 'HOST'", related=("topology.links",))
    for name in ("src", "dst"):
        v = getattr(f, name)
        if v is None:
            raise FieldError(loc + (name,), "required field is missing in a general topology",
                             FieldError.NO_VALUE, "a host of topology.hosts: " + ", ".join(net.hosts))
        if v not in net.hosts:
            problem = f"{v} is a router: flows start and end at hosts" if v in net.routers else f"unknown host '{v}'"
            raise FieldError(loc + (name,), problem, v, "a host of topology.hosts: " + ", ".join(net.hosts))
    if f.src == f.dst:
        raise FieldError(loc + ("dst",), "must not be the flow's src", f.dst, "another host",
                         related=(dotted(loc + ("src",)),))
    if f.path is not None:
        path = check_path(net, list(f.path), f.src, f.dst, loc + ("path",))
    else:
        found = shortest(net, f.src, f.dst)
        if found is None:
            raise FieldError(loc + ("dst",), f"no path from {f.src} to {f.dst}: the topology does not connect "
                             "them", f.dst, f"a host reachable from {f.src} through routers",
                             related=("topology.links",))
        path = found
    if f.return_path is not None:
        back = check_path(net, list(f.return_path), f.dst, f.src, loc + ("return_path",))
    else:
        back = path[::-1]
        _check_steps(net, back, loc + ("path",), ())
    return Route(path, back)


def select(sel: Any, loc: tuple, meta: list[dict]) -> list[int]:
    """Flow ids a selector names: a group label, or a list of labels and flow numbers."""
    groups: dict[str, list[int]] = {}
    for fm in meta:
        groups.setdefault(fm["group"], []).append(fm["id"])
    allowed = (f"flow numbers 0 .. {len(meta) - 1} or group labels: " + ", ".join(repr(g) for g in groups))
    out: list[int] = []
    for item in ([sel] if isinstance(sel, str) else sel):
        if isinstance(item, str):
            if item not in groups:
                raise FieldError(loc, f"no flow group '{item}'", sel, allowed)
            ids = groups[item]
        else:
            if not 0 <= item < len(meta):
                raise FieldError(loc, f"no flow {item}: the study has {len(meta)} flow"
                                 + ("" if len(meta) == 1 else "s"), sel, allowed)
            ids = [item]
        out += [x for x in ids if x not in out]
    if not out:
        raise FieldError(loc, "names no flow", sel, allowed)
    return out


# ------------------------------------------------------------------ the whole network


def resolve(m: StudyFile, net: Net, routes: list[Route], meta: list[dict], mss: int,
            buffer_of: Callable[..., dict]) -> tuple[dict, list[dict], Optional[dict]]:
    """(network, events, controller) of the run config; ``routes`` per flow id.

    ``buffer_of(buf, rate, rtt, mss, loc, related)`` is the dumbbell's buffer
    resolution (resolve._buffer).
    """
    duration = m.study.duration
    every: list[Route] = list(routes)  # each route any flow may take, for the BDP buffers
    events: list[dict] = []
    current = [Route(list(r.path), list(r.back)) for r in routes]
    order = sorted(range(len(m.events)), key=lambda i: m.events[i].at)
    for i in order:
        ev: Event = m.events[i]
        loc = ("events", i)
        if ev.at >= duration:
            raise FieldError(loc + ("at",), f"must be before the end of the run (study.duration = "
                             f"{units.format_time(duration)})", units.format_time(ev.at),
                             f"a time below {units.format_time(duration)}", related=("study.duration",))
        moved: dict[tuple, list[int]] = {}
        for fid in select(ev.flows, loc + ("flows",), meta):
            r = current[fid]
            what = f"flow {fid}"
            path = splice(net, r.path, list(ev.path), loc + ("path",), what)
            if ev.return_path is not None:
                back = splice(net, r.back, list(ev.return_path), loc + ("return_path",), what)
            elif r.mirrored:
                back = path[::-1]
                _check_steps(net, back, loc + ("path",), ())
            else:
                back = r.back
            current[fid] = Route(path, back)
            every.append(current[fid])
            moved.setdefault((tuple(path), tuple(back)), []).append(fid)
        for (path, back), fids in moved.items():
            events.append({"at_ns": ev.at, "flows": fids, "path": net.link_names(list(path)),
                           "return_path": net.link_names(list(back))})
    controller = None
    if m.controller is not None:
        # which flows are candidates depends on their paths: a sweep or case that moves them is named
        paths = tuple(f"flows.{i}.{k}" for i in range(len(m.flows)) for k in ("path", "src", "dst", "kind")) \
            + tuple(f"topology.links.{j}.delay" for j in range(len(m.topology.links or ())))
        sizes = [(i, f.size if f.kind == "transfer" else None) for i, f in enumerate(m.flows) for _ in range(f.count)]
        controller, alts = _controller(m.controller, net, routes, meta, paths, sizes,
                                       (mss + HEADER_BYTES) * 8, m.study.sample_interval)
        every += alts  # also when disabled: a baseline keeps the same buffers
        if not m.controller.enabled:
            controller = None
    network = {"nodes": [{"name": n, "kind": "host"} for n in net.hosts]
               + [{"name": n, "kind": "router"} for n in net.routers],
               "links": [_link(d, net, every, mss, buffer_of) for d in net.links]}
    return network, events, controller


def _controller(c: Controller, net: Net, routes: list[Route], meta: list[dict],
                paths: tuple, sizes: list[tuple[int, Optional[int]]], packet_bits: int,
                interval_ns: int) -> tuple[dict, list[Route]]:
    """``paths``: the dotted fields the flows' paths at the start depend on (``related`` of the errors);
    ``sizes``: each flow's [[flows]] entry and transfer size (None: not a transfer); ``packet_bits``
    and ``interval_ns``: a full-sized packet and the sample interval the utilisation is taken over."""
    loc = ("controller",)
    if c.link not in net.by_name:
        raise FieldError(loc + ("link",), f"unknown link '{c.link}'", c.link,
                         "a directed link name: " + ", ".join(d.name for d in net.links),
                         related=("topology.links",))
    watched = net.by_name[c.link]
    # A full link reads 100 % give or take the packet on the wire at the sample's end (0.998,
    # then 1.001): a threshold above 100 % less two packets per sample is met only now and then.
    most = 1 - 2 * packet_bits * 1e9 / (watched.rate * interval_ns)
    if c.threshold > most:
        # the sample interval at which this threshold is met steadily (none for 100 %)
        need = (units.format_time(math.ceil(2 * packet_bits * 1e9 / (watched.rate * (1 - c.threshold)) / 1e6) * 10**6)
                if c.threshold < 1 else None)
        longer = f"a study.sample_interval of at least {need}"
        if most > 0:
            top = f"{math.floor(most * 10000) / 100:g}%"
            problem, allowed = f"above {top} the controller would see it saturated only now and then", \
                f"at most {top}" + (f", or {longer}" if need else "")
        else:
            problem, allowed = "a sample holds under two full-sized packets, so no threshold works", longer
        raise FieldError(loc + ("threshold",), f"a full {watched.name} reads 100 % only to within a packet per "
                         f"sample interval ({units.format_time(interval_ns)} at "
                         f"{units.format_rate(watched.rate)}): {problem}, and it would never act",
                         f"{c.threshold * 100:g}%", allowed,
                         related=("study.sample_interval", f"topology.links.{watched.entry}.rate"))
    if c.threshold <= 0:
        raise FieldError(loc + ("threshold",), "must be above 0%", "0%", "a percentage such as '90%'")
    if c.release_threshold > c.threshold:
        raise FieldError(loc + ("release_threshold",), f"must not be above threshold ({c.threshold:.0%})",
                         c.release_threshold, "a percentage at most threshold", related=("controller.threshold",))
    wanted = select(c.flows, loc + ("flows",), meta) if c.flows is not None else [fm["id"] for fm in meta]
    part = list(c.alternative)
    if len(part) < 2:
        raise FieldError(loc + ("alternative",), "a path has at least two nodes", part,
                         "nodes from one node of the moved flows' path to a later one, e.g. ['r1', 'r3', 'r2']")
    for n in part:
        if n not in net.nodes:
            raise FieldError(loc + ("alternative",), f"unknown node '{n}'", part,
                             "nodes of topology.hosts and topology.routers: " + ", ".join(net.nodes))
    alternatives = []
    alt_routes = []
    why: dict[int, str] = {}  # the flows of `wanted` that cannot move, and why
    for fid in wanted:
        r = routes[fid]
        if meta[fid]["kind"] == "rpc":
            why[fid] = "is an rpc flow: the controller moves bulk and transfer flows"
        elif watched.name not in net.link_names(r.path):
            why[fid] = f"does not cross {watched.name} at the start (its path: {' → '.join(r.path)})"
        elif part[0] not in r.path or part[-1] not in r.path or r.path.index(part[0]) >= r.path.index(part[-1]):
            why[fid] = f"does not pass {part[0]} and then {part[-1]} (its path: {' → '.join(r.path)})"
    if c.flows is not None:
        _named_can_move(c.flows, meta, why, loc + ("flows",),
                        f"bulk and transfer flows whose path crosses {watched.name} and passes {part[0]} and then "
                        f"{part[-1]}", ("controller.link", "controller.alternative") + paths)
    for fid in wanted:
        r = routes[fid]
        if fid in why:
            continue
        path = splice(net, r.path, part, loc + ("alternative",), f"flow {fid}")
        if watched.name in net.link_names(path):
            raise FieldError(loc + ("alternative",), f"flow {fid}'s alternative path still crosses the watched "
                             f"link {watched.name}", part, "a path around the watched link",
                             related=("controller.link",) + paths)
        back = path[::-1] if r.mirrored else r.back
        _check_steps(net, back, loc + ("alternative",), ())
        alternatives.append({"flow": fid, "path": net.link_names(path), "return_path": net.link_names(back)})
        alt_routes.append(Route(path, back))
    if not alternatives:
        raise FieldError(loc + ("alternative",), f"no bulk or transfer flow{' of controller.flows' if c.flows else ''} "
                         f"crosses {watched.name} on a path from {part[0]} to {part[-1]}", part,
                         "a path between two nodes that the flows on the watched link pass, in their order",
                         related=("controller.link",) + (("controller.flows",) if c.flows is not None else ())
                         + paths)
    # transfers smaller than min_size never have that much left: a controller with only such
    # candidates could never act (bulk flows have no size and always qualify)
    movable = [a["flow"] for a in alternatives]
    if all(sizes[f][1] is not None and sizes[f][1] < c.min_size for f in movable):
        largest = max(movable, key=lambda f: sizes[f][1] or 0)
        entry, size = sizes[largest]
        raise FieldError(loc + ("min_size",), "no candidate transfer can ever have this much left to deliver, so "
                         f"the controller would never act (the largest, flow {largest}, is "
                         f"{units.format_size(size or 0)})", units.format_size(c.min_size),
                         f"at most {units.format_size(size or 0)}", related=(f"flows.{entry}.size",))
    out = {"kind": c.kind, "link": watched.name, "threshold": c.threshold, "hold_ns": c.hold,
           "release_threshold": c.release_threshold, "release_hold_ns": c.release_hold,
           "min_bytes": c.min_size, "min_rate_bps": c.min_rate if c.min_rate is not None else 0,
           "alternatives": alternatives}
    return out, alt_routes


def _named_can_move(sel: Any, meta: list[dict], why: dict[int, str], loc: tuple, allowed: str,
                    related: tuple) -> None:
    """A flow named by its number, or a group none of whose flows can move (``why``): a
    FieldError, rather than a selection that silently leaves it out. A group some of whose
    flows can move names those (as the default selection does)."""
    for item in ([sel] if isinstance(sel, str) else sel):
        ids = [item] if not isinstance(item, str) else [fm["id"] for fm in meta if fm["group"] == item]
        if ids and all(f in why for f in ids):
            f = ids[0]
            problem = (f"no flow of group '{item}' can move: flow {f} {why[f]}" if isinstance(item, str)
                       else f"flow {f} (group '{meta[f]['group']}') {why[f]}")
            raise FieldError(loc, problem, sel, allowed, related=related)


def _link(d: DirLink, net: Net, every: list[Route], mss: int, buffer_of: Callable[..., dict]) -> dict:
    out: dict[str, Any] = {"name": d.name, "from": d.src, "to": d.dst, "rate_bps": d.rate, "delay_ns": d.delay,
                           "loss": d.loss, **({"jitter_ns": d.jitter} if d.jitter else {}), **stall_fields(d.stalls)}
    if net.is_pipe(d):
        return {**out, "buffer_bytes": None, "buffer_pkts": None}
    q = d.qdisc if d.qdisc is not None else qdisc.Qdisc(kind="fifo")
    setting = d.buffer if d.buffer is not None else qdisc.default_buffer(q.kind)
    if d.bdp_rtt is not None:
        if d.bdp_rtt <= 0:
            raise FieldError(d.field_loc("bdp_rtt"), "must be positive", "0s", "a positive time such as '40ms'")
        rtt = d.bdp_rtt
    else:
        rtts = [net.delay(r.path) + net.delay(r.back) for r in every
                if d.name in net.link_names(r.path) or d.name in net.link_names(r.back)]
        other = net.by_ends[(d.dst, d.src)]
        rtt = max(rtts) if rtts else d.delay + other.delay
    related = tuple(dotted(d.field_loc(k)) for k in ("delay", "bdp_rtt", "rate"))
    hint = f"{related[0]} or {related[1]}"
    buf = buffer_of(setting, d.rate, rtt, mss, d.field_loc("buffer"), related, hint)
    out.update(buf)
    out["qdisc"] = qdisc.resolve(q, qdisc.Ctx(
        d.field_loc("qdisc"), d.rate, rtt, mss, buf,
        lambda b, loc: buffer_of(b, d.rate, rtt, mss, loc, related, hint), FieldError))
    return out
