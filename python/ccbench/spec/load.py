"""Reading a study file: TOML → validated document → runs.

Every mistake becomes one :class:`~ccbench.errors.StudyError` with a one-line
message ``<file>: <field>: <problem> (got <value>; allowed: <what>)``.
"""

from __future__ import annotations

import copy
import difflib
import functools
import itertools
import re
import typing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import BaseModel, ValidationError

from ccbench.errors import StudyError

from . import cases, cost, distinct, expect, guard, overrides, profiles, resolve
from .leaves import LeafModels
from .model import BACKENDS, StudyFile
from .sweep import FieldError, dotted, field_names, is_list, is_model, parse_sweep, unwrap

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

_MAX_GOT = 80


@dataclass
class RunSpec:
    """One run: a resolved config (docs/interfaces.md §1) plus its identity."""

    run_id: str
    config_id: str
    params: dict  # swept dotted path -> value as written (string)
    repetition: int  # 0-based
    seed: int
    config: dict
    flow_meta: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def label(self) -> str:
        """Short human description, e.g. "flows.0.cca=cubic rep 1"."""
        parts = [f"{k}={v}" for k, v in self.params.items()]
        return " ".join(parts + [f"rep {self.repetition}"])


class Study:
    """A validated study file; :meth:`runs` gives its runs in a stable order."""

    def __init__(self, *, path: Path, source_text: str, document: dict, model: StudyFile, backend: str,
                 axes: list, runs: list["_Combo"], profile: Optional[str] = None, profiles: tuple = ()):
        self.path = path
        self.source_text = source_text
        self.document = document
        self.name: str = model.study.name
        self.description: str = model.study.description
        self.backend: str = backend
        self.repetitions: int = model.study.repetitions
        self.seed: int = model.study.seed
        self.sweep: dict[str, list[str]] = {a.key: list(a.labels) for a in axes}
        self.profile: Optional[str] = profile  # the profile applied, if any
        self.profiles: tuple[str, ...] = tuple(profiles)  # every profile the file defines
        self._combos = runs
        self.estimate: Optional[cost.Estimate] = None  # set by parse_study

    @property
    def results_name(self) -> str:
        """Name of the default results directory: the study name, plus ``-<profile>``."""
        return self.name if self.profile is None else f"{self.name}-{self.profile}"

    def runs(self) -> list[RunSpec]:
        """Sweep product (file order, last key fastest) × repetitions (innermost); fresh objects
        on every call (the caller may change them)."""
        return [c.runspec(*r) for c in self._combos for r in c.reps]

    def run_ids(self) -> list[str]:
        """The run ids of :meth:`runs`, in the same order, without building the runs."""
        return [r[2] for c in self._combos for r in c.reps]

    @property
    def n_runs(self) -> int:
        return sum(len(c.reps) for c in self._combos)

    def to_dict(self) -> dict:
        """JSON-able description of the study, for storing alongside its results."""
        return {
            "name": self.name,
            "description": self.description,
            "backend": self.backend,
            "profile": self.profile,
            "path": str(self.path),
            "repetitions": self.repetitions,
            "seed": self.seed,
            "sweep": {k: list(v) for k, v in self.sweep.items()},
            "n_runs": self.n_runs,
            "document": copy.deepcopy(self.document),
            "source_text": self.source_text,
        }

    def __repr__(self) -> str:
        return f"Study({self.name!r}, backend={self.backend!r}, runs={self.n_runs})"


# ------------------------------------------------------------------ loading


def load_study(path: Union[str, Path], *, backend: Optional[str] = None, profile: Optional[str] = None,
               limits: Optional[cost.Limits] = cost.DEFAULT_LIMITS) -> Study:
    """Read and validate a study file.  ``backend`` overrides [study] backend;
    ``profile`` applies one of the file's [profiles] (ccbench.spec.profiles).

    Raises StudyError with a one-line message.
    """
    p = Path(path)
    shown = str(path)
    data = guard.read_study_bytes(p, shown)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise StudyError(f"{shown}: line {line}: not valid UTF-8 text") from None
    return parse_study(text, filename=shown, path=p, backend=backend, profile=profile, limits=limits)


def parse_study(text: str, *, filename: str = "<study>", path: Optional[Path] = None,
                backend: Optional[str] = None, profile: Optional[str] = None,
                limits: Optional[cost.Limits] = cost.DEFAULT_LIMITS) -> Study:
    """Validate study text (the contents of a study file), with ``profile`` applied if given.

    The file's other profiles (and the file without one) are checked too, lightly
    (see :func:`_check_variant`), so that a mistake in one of them is found on any load.
    A study whose estimated cost (ccbench.spec.cost) is beyond ``limits`` is
    refused with a StudyError; ``limits=None`` accepts any size.
    """
    text = guard.strip_bom(text)
    try:
        doc = guard.loads(text, filename)
    except tomllib.TOMLDecodeError as e:
        raise StudyError(_toml_message(filename, e)) from None

    original = doc
    try:
        doc, raw_profiles = profiles.take(doc)
        base = {k: v for k, v in doc.items() if k != "sweep"}
        items, raw_cases, case_pos = cases.split_sweep(doc.get("sweep"))
        names = cases.case_names(raw_cases)
        parsed = {n: profiles.parse(n, t, base, names) for n, t in raw_profiles.items()}
    except FieldError as e:
        raise StudyError(_fmt(filename, e.field or dotted(e.loc), e.problem, e.got, e.allowed), e.detail) from None
    if profile is not None and profile not in parsed:
        raise StudyError(f"{filename}: --profile: the study has no profile '{profile}' "
                         f"(allowed: {', '.join(parsed) or 'none: it has no [profiles] tables'})")
    if backend is not None and backend not in BACKENDS:
        raise StudyError(f"--backend: unknown backend (got {backend!r}; allowed: {', '.join(BACKENDS)})")

    def variant(name: Optional[str]) -> _Variant:
        return _variant(filename, base, items, raw_cases, case_pos, parsed[name] if name is not None else None)

    chosen = variant(profile)
    axes = chosen.axes
    study_table = chosen.base.get("study")
    cost.check_count(filename, axes, study_table.get("repetitions", 1) if isinstance(study_table, dict) else 1,
                     limits)
    expander = _Expander(filename, path, chosen, backend)
    combos: list[_Combo] = []
    seen_ids: set[str] = set()
    first_model: Optional[StudyFile] = None
    estimator: Optional[cost.Estimator] = None
    params_json = _ParamsJson(axes)

    for combo in itertools.product(*(range(len(a.values)) for a in axes)):
        model, be, config, jitters, meta, basis_json, config_id = expander.configure(combo)
        if first_model is None:
            first_model = model
            estimator = cost.Estimator(be)
        params = {a.key: a.labels[i] for a, i in zip(axes, combo)}
        reps = []
        id_text = _RunIdText(model.study.name, be, model.study.seed, params_json.text(params, combo), basis_json)
        for rep in range(model.study.repetitions):
            seed = resolve.derive_seed(model.study.seed, config_id, rep)
            run_id = id_text.run_id(rep)
            if run_id in seen_ids:  # pragma: no cover - 48-bit collision
                raise StudyError(f"{filename}: sweep: two runs hash to the same run id {run_id}")
            seen_ids.add(run_id)
            reps.append((rep, seed, run_id))
        assert estimator is not None
        estimator.add(config, len(reps), params)
        combos.append(_Combo(config_id, params, config, jitters, meta, reps))

    assert first_model is not None and estimator is not None
    if first_model.expect:
        expect.check_kinds(first_model.expect, _flow_kinds(combos), filename)
        expect.check_refs(first_model.expect, all("bottleneck" in c.config for c in combos), filename)
        if any(e.link is not None for e in first_model.expect):
            links = [ln for c in combos for ln in (c.config.get("network") or {}).get("links", [])]
            # both buffers null: a pipe (docs/interfaces.md §1), queueing in no configuration
            queueing = {ln["name"] for ln in links
                        if ln.get("buffer_bytes") is not None or ln.get("buffer_pkts") is not None}
            expect.check_links(first_model.expect, queueing, {ln["name"] for ln in links} - queueing, filename)
    for other in [None, *parsed]:
        if other != profile:
            _check_variant(filename, path, variant(other))
    estimate = estimator.check(filename, limits)
    study = Study(path=path or Path(filename), source_text=text, document=original,
                  model=first_model, backend=backend or first_model.study.backend, axes=axes, runs=combos,
                  profile=profile, profiles=tuple(parsed))
    study.estimate = estimate
    return study


def _flow_kinds(combos: list["_Combo"]) -> set[str]:
    """The kinds of flow (bulk, rpc, transfer) of any configuration."""
    kinds: set[str] = set()
    last = None
    for c in combos:
        if c.meta is not last:  # configurations share their flows' meta while the flows do not change
            kinds.update(m["kind"] for m in c.meta)
            last = c.meta
    return kinds


@dataclass
class _Variant:
    """The study file as one profile (or none) makes it: the document without [sweep]
    and [profiles], its sweep axes and the fields the profile sets."""

    profile: Optional[str]
    base: dict
    axes: list
    fixed: list  # the profile's Overrides of plain fields


def _variant(filename: str, base: dict, items: list, raw_cases: Any, case_pos: int,
             prof: Optional[profiles.Profile]) -> _Variant:
    renamed: dict[str, str] = {}
    try:
        if prof is not None:
            base = overrides.apply(base, prof.overrides)
            items, renamed = profiles.apply_sweep(items, prof)
            raw_cases = cases.select(raw_cases, {a: c for a, (c, _) in prof.cases.items()})
        plain = profiles.rename_axes(parse_sweep(dict(items), base), renamed)
        case_axes = cases.parse(raw_cases, base, plain, prof.case_sets if prof is not None else None)
        axes = plain[:case_pos] + case_axes + plain[case_pos:]
        if prof is not None:
            profiles.check_conflicts(prof, axes)
    except FieldError as e:
        fieldname = e.field or dotted(e.loc)
        for key, shown in renamed.items():
            if fieldname == f'sweep."{key}"':
                fieldname = shown
        raise StudyError(_fmt(filename, fieldname, e.problem, e.got, e.allowed), e.detail) from None
    return _Variant(prof.name if prof is not None else None, base, axes, list(prof.overrides) if prof else [])


def _check_variant(filename: str, path: Optional[Path], v: _Variant) -> None:
    """Check a variant of the study that is not the one loaded: its first configuration and
    each value of each axis with the other axes at their first (not the whole product), on the
    variant's own backend, without what depends on this machine (resolve.Resolver's ``local``)."""
    n = len(v.axes)
    combos = [(0,) * n] + [tuple(i if j == k else 0 for j in range(n))
                           for k, a in enumerate(v.axes) for i in range(1, len(a.values))]
    note = f"profile '{v.profile}'" if v.profile is not None else "the study without a profile"
    expander = _Expander(filename, path, v, None, local=False, note=note)
    for combo in combos:
        expander.configure(combo)


class _Expander:
    """The configurations of one variant: each one's validated model and resolved config
    (StudyError naming the field otherwise), each its own (see distinct.py)."""

    def __init__(self, filename: str, path: Optional[Path], v: _Variant, backend: Optional[str],
                 local: bool = True, note: str = ""):
        self.filename, self.path, self.v, self.backend, self.local, self.note = filename, path, v, backend, local, note
        self.leaves = LeafModels(v.base, v.axes)
        self.resolvers: dict[str, resolve.Resolver] = {}
        self.first_of: dict[str, tuple] = {}  # config_id -> the first combination that made it

    def where(self, combo: tuple) -> "_Where":  # only for a message: not built for every configuration
        owners = cases.owners(self.v.axes, combo) + [(o.path, o.field) for o in self.v.fixed]
        return _Where(owners, self.v.axes, combo, self.note)

    def model(self, combo: tuple) -> StudyFile:
        model = self.leaves.model(combo)
        if model is None:
            cdoc = cases.apply_all(self.v.base, self.v.axes, combo)
            try:
                model = StudyFile.model_validate(cdoc)
            except ValidationError as ve:
                raise StudyError(_pydantic_message(self.filename, ve, cdoc, self.where(combo))) from None
        return model

    def configure(self, combo: tuple) -> tuple[StudyFile, str, dict, list, list, str, str]:
        """(model, backend, config, jitters, meta, basis_json, config_id) of one configuration."""
        model = self.model(combo)
        be = self.backend or model.study.backend
        resolver = self.resolvers.get(be)
        if resolver is None:
            base = self.path.parent if self.path is not None else None
            resolver = self.resolvers[be] = resolve.Resolver(be, base, local=self.local)
        try:
            config, jitters, meta = resolver.resolve(model)
        except FieldError as e:
            doc = cases.apply_all(self.v.base, self.v.axes, combo)
            raise StudyError(_field_message(self.filename, e, doc, self.where(combo)), e.detail) from None
        basis_json = resolver.basis_json(config, jitters)
        config_id = resolve.hash_text(basis_json)
        first = self.first_of.setdefault(config_id, combo)
        if first != combo:
            raise StudyError(self._same(first, combo))
        return model, be, config, jitters, meta, basis_json, config_id

    def _same(self, first: tuple, combo: tuple) -> str:
        """Two configurations that resolve to the same runs: which sweep values, and why if known."""
        axes = self.v.axes
        moved = [k for k in range(len(axes)) if first[k] != combo[k]]
        a, b = self.model(first), self.model(combo)
        if len(moved) == 1:
            k = moved[0]
            ax = axes[k]
            why = distinct.why_same(ax, a, b)
            problem = (f"{ax.labels[first[k]]!r} and {ax.labels[combo[k]]!r} give the same run configuration"
                       + (f"; {why}" if why else ""))
            fieldname = ax.field
        else:
            def values(c: tuple) -> str:
                return ", ".join(f"{axes[k].key} = {axes[k].labels[c[k]]!r}" for k in moved)

            problem = f"[{values(first)}] and [{values(combo)}] give the same run configuration"
            fieldname = "sweep"
        if self.note and not fieldname.startswith("profiles."):  # a profile's key names its profile
            problem += f" [in {self.note}]"
        return _fmt(self.filename, fieldname, problem, allowed=distinct.ALLOWED)


@functools.lru_cache(maxsize=256, typed=True)
def _canonical_scalar(x: Any) -> str:
    return resolve.canonical(x)


class _ParamsJson:
    """resolve.canonical(params) of each configuration, from each axis's key and labels
    serialised once (params maps each axis's key to its label; keys in sorted order)."""

    def __init__(self, axes: list):
        self.order = sorted(range(len(axes)), key=lambda j: axes[j].key)
        self.unique = len({a.key for a in axes}) == len(axes)  # else a later axis's label wins: plain JSON
        self.keys = [resolve.canonical(a.key) for a in axes]
        self.labels = [[resolve.canonical(lab) for lab in a.labels] for a in axes]

    def text(self, params: dict, combo: tuple) -> str:
        if not self.unique:
            return resolve.canonical(params)
        return "{" + ",".join(f"{self.keys[j]}:{self.labels[j][combo[j]]}" for j in self.order) + "}"


class _RunIdText:
    """resolve.short_hash of {study, backend, study_seed, params, config, repetition} for each
    repetition, with everything but the repetition serialised once (keys in sorted order)."""

    def __init__(self, name: str, backend: str, study_seed: int, params_json: str, basis_json: str):
        c = _canonical_scalar  # the same for every configuration of a study
        self.head = f'{{"backend":{c(backend)},"config":{basis_json},"params":{params_json},"repetition":'
        self.tail = f',"study":{c(name)},"study_seed":{c(study_seed)}}}'

    def run_id(self, rep: int) -> str:
        return resolve.hash_text(f"{self.head}{rep}{self.tail}")


@dataclass
class _Combo:
    """One configuration of the sweep: its resolved config and its repetitions' (rep, seed, run_id)."""

    config_id: str
    params: dict
    config: dict
    jitters: list
    meta: list
    reps: list

    def runspec(self, rep: int, seed: int, run_id: str) -> RunSpec:
        return _LazyRunSpec(self, rep, seed, run_id)


class _LazyRunSpec(RunSpec):
    """A RunSpec whose config and flow_meta are built on first use, so that a study of
    thousands of runs starts at once (each is built just before it runs). It pickles
    as a plain RunSpec."""

    def __init__(self, combo: _Combo, rep: int, seed: int, run_id: str):  # noqa: D107
        self.__dict__.update(run_id=run_id, config_id=combo.config_id, params=dict(combo.params),
                             repetition=rep, seed=seed, _combo=combo)

    def _built(self, key: str) -> Any:
        d = self.__dict__
        if key not in d:
            c = d["_combo"]
            config, flow_meta = resolve.finish(c.config, c.jitters, c.meta, d["seed"])
            d.setdefault("config", config)
            d.setdefault("flow_meta", flow_meta)
        return d[key]

    config = property(lambda self: self._built("config"),  # type: ignore[assignment]
                      lambda self, v: self.__dict__.__setitem__("config", v))
    flow_meta = property(lambda self: self._built("flow_meta"),  # type: ignore[assignment]
                         lambda self, v: self.__dict__.__setitem__("flow_meta", v))

    def __reduce__(self) -> Any:
        return (RunSpec, (self.run_id, self.config_id, self.params, self.repetition, self.seed, self.config,
                          self.flow_meta))


@dataclass
class _Where:
    """What set the fields of one sweep combination: for naming them in messages."""

    owners: list  # (path, field name) of every field a sweep key, case or profile set
    axes: list
    combo: tuple
    note: str = ""  # the variant checked, when it is not the one loaded: "profile 'quick'"


# ------------------------------------------------------------------ messages


def _got(value: Any) -> str:
    s = repr(value)
    if len(s) > _MAX_GOT:
        s = s[: _MAX_GOT - 3] + "..."
    return s


def _fmt(filename: str, fieldname: str, problem: str, got: Any = FieldError.NO_VALUE,
         allowed: Optional[str] = None) -> str:
    inner = []
    if got is not FieldError.NO_VALUE:
        inner.append(f"got {_got(got)}")
    if allowed:
        inner.append(f"allowed: {allowed}")
    tail = f" ({'; '.join(inner)})" if inner else ""
    prefix = f"{filename}: {fieldname}: " if fieldname else f"{filename}: "
    return _one_line(prefix + problem + tail)


def _one_line(s: str) -> str:
    return " ".join(s.split("\n"))


def _toml_message(filename: str, e: Exception) -> str:
    msg = str(e)
    m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    if m:
        problem = msg[: m.start()].strip()
        where = f"line {m.group(1)}, column {m.group(2)}"
    else:
        m = re.search(r"\(at end of document\)", msg)
        problem = msg[: m.start()].strip() if m else msg
        where = "end of file"
    problem = problem[:1].lower() + problem[1:]
    return _one_line(f"{filename}: {where}: TOML syntax error: {problem}")


def _lookup(doc: Any, loc: tuple) -> Any:
    node = doc
    for p in loc:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and isinstance(p, int) and 0 <= p < len(node):
            node = node[p]
        else:
            return FieldError.NO_VALUE
    return node


def _attribute(filename: str, loc: tuple, problem: str, got: Any, allowed: Optional[str],
               related: tuple, where: "_Where") -> str:
    """Name the sweep key, case or profile key that set the field; else the field, plus the
    sweep values it depends on."""
    name = overrides.owner_field(loc, where.owners)
    if where.note and not (name or "").startswith("profiles."):  # a profile's key names its profile
        problem = f"{problem} [in {where.note}]"
    if name is not None:
        return _fmt(filename, name, problem, got, allowed)
    deps = []
    for a, i in zip(where.axes, where.combo):
        if any(k == r or k.startswith(r + ".") or r.startswith(k + ".")
               for r in related for k in cases.set_paths(a, i)):
            deps.append(f"{a.key} = {a.labels[i]!r}")
    if deps:
        problem = f"{problem} [with sweep {', '.join(deps)}]"
    return _fmt(filename, dotted(loc), problem, got, allowed)


def _field_message(filename: str, e: FieldError, doc: dict, where: "_Where") -> str:
    raw = _lookup(doc, e.loc)
    got = raw if raw is not FieldError.NO_VALUE else e.got
    return _attribute(filename, e.loc, e.problem, got, e.allowed, e.related, where)


_PROBLEMS = {
    "missing": "required field is missing",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be an array",
    "model_type": "must be a table",
    "dict_type": "must be a table",
    "model_attributes_type": "must be a table",
    "literal_error": "not an allowed value",
    "too_short": "must not be empty",
    "string_too_short": "must not be empty",
    "string_pattern_mismatch": "has characters that are not allowed here",
}


def _field_info(loc: tuple) -> tuple[Optional[type[BaseModel]], Any]:
    """The model owning the last element of loc, and that field's FieldInfo (or None)."""
    ann: Any = StudyFile
    parent: Optional[type[BaseModel]] = None
    info = None
    for p in loc:
        if is_model(ann) and isinstance(p, str):
            parent = ann
            info = ann.model_fields.get(p)
            if info is None:
                return parent, None
            ann = unwrap(info.annotation)
        elif is_list(ann) and isinstance(p, int):
            ann = unwrap(typing.get_args(ann)[0])
            parent, info = None, info
        else:
            return None, None
    return parent, info


def _first_error(errors: list) -> tuple[dict, str]:
    """The error to report, and what to add to an unknown field's problem: a
    required field reported missing beside an unknown key of the same table
    that is close to its name is a typo of it (`rat = ...`): the key is named."""
    err = errors[0]
    if err["type"] == "missing":
        loc = tuple(err["loc"])
        for other in errors:
            oloc = tuple(other["loc"])
            if (other["type"] == "extra_forbidden" and oloc[:-1] == loc[:-1]
                    and difflib.get_close_matches(str(oloc[-1]), [str(loc[-1])], n=1)):
                return other, f" ({loc[-1]} is required)"
    return err, ""


def _pydantic_message(filename: str, ve: ValidationError, doc: dict, where: "_Where") -> str:
    err, required = _first_error(ve.errors())
    loc = tuple(err["loc"])
    typ = err["type"]
    got: Any = err.get("input", FieldError.NO_VALUE)
    ctx = err.get("ctx") or {}
    parent, info = _field_info(loc)
    allowed = info.description if info is not None else None
    if typ == "ccbench_unit":
        problem, allowed = ctx["problem"], ctx["allowed"]
    elif typ == "extra_forbidden":
        names = field_names(parent) if parent is not None else []
        key = str(loc[-1])
        close = difflib.get_close_matches(key, names, n=1)
        problem = "unknown field" + (f"; did you mean '{close[0]}'?" if close else "") + required
        allowed = ", ".join(names)
    elif typ == "missing":
        problem = _PROBLEMS[typ]
        got = FieldError.NO_VALUE
    elif typ in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        op = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">", "less_than": "<"}[typ]
        bound = next(iter(ctx.values()))
        problem = f"must be {op} {bound}"
    else:
        problem = _PROBLEMS.get(typ) or err.get("msg", "invalid value")
    if typ == "literal_error" and ctx.get("expected"):
        allowed = ctx["expected"].replace(" or ", ", ")
    written = _as_written(doc, loc)
    if _is_value_list(got) and not _takes_list(info) and typ != "extra_forbidden":
        # A list where one value belongs is most often a sweep written in place.
        problem += f"; to run each of these values, list them under [sweep] as \"{dotted(written)}\" = [...]"
    return _attribute(filename, written, problem, got, allowed, (), where)


def _is_value_list(got: Any) -> bool:
    """A non-empty list of plain values (strings, numbers, booleans)."""
    return isinstance(got, list) and bool(got) and all(isinstance(v, (str, int, float, bool)) for v in got)


def _takes_list(info: Any) -> bool:
    """A field that may be an array itself (a path, a flow selector): a list there is no sweep."""
    todo = [info.annotation] if info is not None else []
    while todo:
        ann = todo.pop()
        if is_list(ann):
            return True
        if typing.get_origin(ann) in (typing.Union, typing.Annotated):
            todo += typing.get_args(ann)
    return False


def _as_written(doc: Any, loc: tuple) -> tuple:
    """`loc` as the file has it: where a field takes a table or an array of
    them (a link's `stalls`) and the file gave one table, the model's index
    into its one-element array is not the file's."""
    out, node = [], doc
    for p in loc:
        if isinstance(p, int) and isinstance(node, dict):
            continue
        out.append(p)
        if isinstance(node, dict):
            node = node.get(p)
        elif isinstance(node, list) and isinstance(p, int) and 0 <= p < len(node):
            node = node[p]
        else:
            node = None
    return tuple(out)
