"""Cross-check a validated :class:`~mmaas.spec.model.ModelSpec` against its ONNX graph and
complete it: datatypes and shapes filled from the graph, every input given a profile.

Rules (optimization profiles as trtexec's ``--minShapes/--optShapes/--maxShapes`` take
them; batching as Triton's ``max_batch_size``):

* inputs and outputs are matched by exact name; a name the graph lacks is an error that
  lists the real ones; a name listed twice cites both lines;
* a ``datatype`` or ``shape`` written in the spec must agree with the graph (a spec shape
  may fix an axis the graph leaves dynamic, never change a fixed one); except an output's
  shape, which may be its real one where the graph declares another (another rank, other
  fixed sizes: exporters get outputs wrong): served as written, and the build's profile
  check fails unless every run's output fits it (:mod:`mmaas.stage.outputs`);
* ``min``, ``opt`` and ``max`` come together, one size per axis, ``min <= opt <= max``,
  and equal the fixed size on fixed axes; profiles match by input and axis, never by the
  graph's dim symbols; an input with a dynamic axis needs a profile; a static input gets
  ``min = opt = max = shape``;
* ``max_batch_size > 0``: axis 0 of every input and output is the batch axis; the profile
  batch runs from 1 to ``max_batch_size``; above 1 the graph's axis 0 must be dynamic.
  ``max_batch_size: 0`` means no batch axis: profiles are plain full shapes;
* an input's ``sample_values`` fit its datatype; a file of them is read into the spec
  (:mod:`mmaas.spec.sample_values`);
* the ``checks:`` gates name real tensors and shapes inside the profile (spec_checks);
* the back end refuses what it cannot build, through the injected checks
  (:class:`~mmaas.spec.hooks.SpecChecks`): a precision it lacks, a tensor datatype it
  cannot carry, an input name it cannot take, settings that cannot work together.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mmaas.core.errors import SpecProblem
from mmaas.spec.checks import check_gates
from mmaas.spec.hooks import SpecChecks
from mmaas.spec.model import InputSpec, ModelSpec, OutputSpec, TensorSpec
from mmaas.spec.onnx_graph import GraphSignature, GraphTensor
from mmaas.spec.profile import check_profile
from mmaas.spec.sample_values import complete_sample_values
from mmaas.spec.yamlio import KeyPath, YamlDocument


def complete_spec(
    spec: ModelSpec,
    graph: GraphSignature,
    doc: YamlDocument,
    checks: SpecChecks,
    invalid: frozenset[KeyPath] = frozenset(),
) -> tuple[ModelSpec, list[SpecProblem]]:
    """Check ``spec`` against ``graph`` and its back end's ``checks``; return the completed
    spec and every problem found (located through ``doc``). The completed spec lists every
    graph input in graph order, and the outputs the spec lists (all graph outputs when it
    lists none). ``invalid``: key paths whose values were refused by validation and dropped
    from ``spec``; nothing is said at or under them (their problem is reported already)."""
    completer = _Completer(spec, doc, checks, invalid)
    refused = checks.check_precision(spec)
    if refused:
        completer.report(("target_precision",), refused)
    completer.check_batching()
    inputs = completer.tensors("input", spec.inputs, graph.inputs)
    outputs = completer.tensors("output", spec.outputs, graph.outputs)
    completed = spec.model_copy(update={"inputs": inputs, "outputs": outputs})
    if not completer.problems:  # the gates name tensors: check them against a sound signature
        check_gates(completed, Path(doc.file).parent, completer.report)
        for path, message in checks.check_engine(completed):
            completer.report(path, message)
    return completed, completer.problems


class _Completer:
    def __init__(
        self, spec: ModelSpec, doc: YamlDocument, checks: SpecChecks, invalid: frozenset[KeyPath]
    ) -> None:
        self.spec = spec
        self.doc = doc
        self.checks = checks
        self.invalid = invalid
        self.problems: list[SpecProblem] = []

    def report(self, path: KeyPath, message: str) -> None:
        if not any(path[: len(key)] == key for key in self.invalid):
            self.problems.append(self.doc.problem(path, message))

    def check_batching(self) -> None:
        """Dynamic batching stacks requests along the batch axis: it needs
        ``max_batch_size > 0``, and no preferred batch size may exceed it (Triton's rules)."""
        batching, batch = self.spec.runtime.dynamic_batching, self.spec.max_batch_size
        if batching is None:
            return
        if batch == 0:
            self.report(
                ("runtime", "dynamic_batching"),
                "dynamic batching needs a batch axis; set max_batch_size above 0 or "
                "remove runtime.dynamic_batching",
            )
        for index, size in enumerate(batching.preferred_batch_size):
            if batch and size > batch:
                self.report(
                    ("runtime", "dynamic_batching", "preferred_batch_size", index),
                    f"preferred batch size {size} exceeds max_batch_size {batch}; "
                    f"use a size from 1 to {batch}",
                )

    def tensors(
        self, role: str, entries: Sequence[TensorSpec], declared: Sequence[GraphTensor]
    ) -> list[TensorSpec]:
        key = role + "s"
        listed = self._index(role, entries)
        real = ", ".join(repr(tensor.name) for tensor in declared) or "none"
        for name, index in listed.items():
            if not any(tensor.name == name for tensor in declared):
                self.report(
                    (key, index, "name"),
                    f"the ONNX model has no {role} {name!r}; its {key} are: {real}",
                )
        completed = []
        for tensor in declared:
            found = listed.get(tensor.name)
            if found is None and role == "output" and listed:
                continue
            entry = entries[found] if found is not None else None
            path: KeyPath = (key, found) if found is not None else (key,)
            done = self._tensor(role, tensor, entry, path)
            if done is not None:
                completed.append(done)
        return completed

    def _index(self, role: str, entries: Sequence[TensorSpec]) -> dict[str, int]:
        seen: dict[str, int] = {}
        for index, entry in enumerate(entries):
            if entry.name in seen:
                first = self.doc.position((role + "s", seen[entry.name]))
                again = self.doc.position((role + "s", index))
                self.report(
                    (role + "s", index, "name"),
                    f"{role} {entry.name!r} is listed twice (line {first and first[0]} "
                    f"and line {again and again[0]}); keep one entry",
                )
                continue
            seen[entry.name] = index
        return seen

    def _tensor(
        self, role: str, tensor: GraphTensor, entry: TensorSpec | None, path: KeyPath
    ) -> TensorSpec | None:
        what = f"{role} {tensor.name!r}"
        if entry is not None and entry.datatype not in (None, tensor.datatype):
            self.report(
                (*path, "datatype"),
                f"{what}: datatype {entry.datatype} contradicts "
                f"the ONNX model, which declares {tensor.datatype}; write "
                f"{tensor.datatype} or remove the key (it is read from the model)",
            )
        refused = self.checks.check_datatype(self.spec, tensor.datatype)
        if refused:
            self.report((*path, "name") if entry else path, f"{what}: {refused}")
        shape = self._shape(what, tensor, entry, path, stated=role == "output")
        if shape is None:
            return None
        self._check_batch_axis(what, shape, path)
        if role == "output":
            return OutputSpec(name=tensor.name, datatype=tensor.datatype, shape=list(shape))
        refused = self.checks.check_input(self.spec, tensor.name)
        if refused:
            self.report((*path, "name") if entry else path, f"{what}: {refused}")
        given = (entry.min, entry.opt, entry.max) if isinstance(entry, InputSpec) else None
        unknown = frozenset(key for key in ("min", "opt", "max") if (*path, key) in self.invalid)
        profile = check_profile(
            what, shape, given, path, self.spec.max_batch_size, self.report, unknown
        )
        if profile is None:
            return None
        low, opt, high = profile
        values = complete_sample_values(
            tensor.name,
            tensor.datatype,
            entry.sample_values if isinstance(entry, InputSpec) else None,
            Path(self.doc.file).parent,
            path,
            self.report,
        )
        return InputSpec(
            name=tensor.name,
            datatype=tensor.datatype,
            shape=list(shape),
            min=low,
            opt=opt,
            max=high,
            sample_values=values,
        )

    def _shape(
        self,
        what: str,
        tensor: GraphTensor,
        entry: TensorSpec | None,
        path: KeyPath,
        stated: bool = False,
    ) -> tuple[int, ...] | None:
        """The tensor's shape: as written (``stated``: any shape of sizes > 0 or -1, the
        graph's declaration notwithstanding), else as the graph declares it."""
        written = None if entry is None or entry.shape is None else tuple(entry.shape)
        if stated and written is not None:
            if any(dim != -1 and dim <= 0 for dim in written):
                self.report(
                    (*path, "shape"),
                    f"{what}: shape {list(written)} has a size below 1; write each axis "
                    "as its size or -1 (dynamic)",
                )
                return None
            return written
        if tensor.shape is None:
            if written is None:
                self.report(
                    path,
                    f"{what}: the ONNX model declares no shape; write its "
                    "shape (-1 for dynamic axes) under shape:",
                )
            return written
        if written is None:
            return tensor.shape
        if len(written) != len(tensor.shape) or any(
            (dim != -1 and dim <= 0) or (declared > 0 and dim != declared)
            for dim, declared in zip(written, tensor.shape, strict=False)
        ):
            self.report(
                (*path, "shape"),
                f"{what}: shape {list(written)} contradicts the ONNX "
                f"model, which declares {list(tensor.shape)} (-1 = dynamic); a spec "
                "shape may only fix dynamic axes: remove it or correct it",
            )
            return None
        return written

    def _check_batch_axis(self, what: str, shape: tuple[int, ...], path: KeyPath) -> None:
        batch = self.spec.max_batch_size
        if batch == 0:
            return
        if not shape:
            self.report(
                path,
                f"{what} is a scalar, so it has no batch axis; set max_batch_size: 0 (no batching)",
            )
        elif batch > 1 and shape[0] != -1:
            self.report(
                path,
                f"{what}: axis 0 is fixed at {shape[0]} in the ONNX model, so it "
                f"cannot batch up to max_batch_size {batch}; set max_batch_size: 0 "
                "(or 1), or export the model with a dynamic batch axis",
            )
