"""The one table of TensorRT releases -> the trtexec flags their option parser accepts.

Every row was checked against trtexec's own option parser, ``samples/common/
sampleOptions.cpp`` of the TensorRT OSS repository (NVIDIA/TensorRT), as stored copies
of the release branches (and the logs in ``shared/fixtures/trtexec``):

=========  ===============================================================================
row        parser copy read, and what it decides
=========  ===============================================================================
8.0        8.0-era copy: ``--workspace=N`` (MiB), ``--buildOnly`` (inference options),
           ``--fp16 --int8 --calib --noTF32 --timingCacheFile --exportTimes
           --exportProfile``; no ``--exportLayerInfo``, ``--profilingVerbosity`` or
           scalar shapes. Used for 8.0-8.3 (later 8.2/8.3 add flags; none is emitted).
8.4        8.4/8.5 copy (commit cabb42f): ``--memPoolSize=workspace:N`` (a bare number
           read with ``stod``, in MiB; ``--workspace`` deprecated), ``--buildOnly``,
           ``--exportLayerInfo``, ``--profilingVerbosity``. Used for 8.4-8.5.
8.6        release/8.6 copy: ``--skipInference`` (``--buildOnly`` deprecated),
           ``--builderOptimizationLevel``, ``--hardwareCompatibilityLevel=none|ampere+``,
           ``--versionCompatible``. ``--fp8`` parses but is refused here (fp8 builds
           need TensorRT 10).
10.0       release/10.0 copy (10.0.1): ``--workspace`` removed; ``--memPoolSize`` value is
           ``stod x unit`` stored as MiB, so ``2048M`` would mean 2048 x 2^20 MiB: the
           bare number (NVIDIA's own 8.x->10.x migration form) is emitted. Scalar shapes
           ``name:scalar``; ``--bf16 --fp8 --stronglyTyped --errorOnTimingCacheMiss``.
10.9       ``--hardwareCompatibilityLevel=sameComputeCapability`` (TensorRT 10.9 release
           notes: kSAME_COMPUTE_CAPABILITY added).
10.14      10.x main copy: ``--memPoolSize`` takes base-2 suffixes (default M), so
           ``workspace:2048M`` is 2048 MiB. The 10.14.1/10.16.1 fixture logs prove the
           suffix parser: ``workspace:1024MiB`` was read as 1024 bytes (suffix ``B``).
11.0       main (11.x) copy: ``--fp16 --bf16 --int8 --fp8 --int4 --best --calib``
           removed (every network is strongly typed); ``--stronglyTyped`` still parses
           but is redundant and not emitted.
=========  ===============================================================================

A flag not in a row is never emitted for that row; a spec setting that needs one is
refused before any build starts (:func:`mmaas.backends.tensorrt.builder.trtexec.argv.trtexec_argv`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from mmaas.core.errors import UsageError

HARDWARE_LEVELS_AMPERE = frozenset({"none", "ampere+"})
HARDWARE_LEVELS_ALL = frozenset({"none", "ampere+", "sameComputeCapability"})


@dataclass(frozen=True)
class TrtexecFlags:
    """What one TensorRT release's trtexec accepts (see the module table).

    Attributes:
        release: first release of the row, ``"major.minor"``.
        workspace_flag: ``"--workspace"`` (``--workspace=N``) or ``"--memPoolSize"``.
        workspace_suffix: text after the MiB number in ``--memPoolSize=workspace:N``.
        skip_inference_flag: ``--buildOnly`` or ``--skipInference``.
        precisions: ``target_precision`` values mapped to a builder flag on this row.
        strongly_typed: ``--stronglyTyped`` exists (and is needed for typed graphs).
        always_strongly_typed: every network is strongly typed (TensorRT 11).
        scalar_shapes: shape specs accept ``name:scalar``.
        builder_optimization_level: ``--builderOptimizationLevel`` exists.
        hardware_levels: values ``--hardwareCompatibilityLevel`` accepts (empty: no flag).
        version_compatible: ``--versionCompatible`` exists.
        error_on_cache_miss: ``--errorOnTimingCacheMiss`` exists.
        layer_info: ``--exportLayerInfo`` and ``--profilingVerbosity`` exist.
    """

    release: str
    workspace_flag: str
    workspace_suffix: str
    skip_inference_flag: str
    precisions: frozenset[str]
    strongly_typed: bool
    always_strongly_typed: bool
    scalar_shapes: bool
    builder_optimization_level: bool
    hardware_levels: frozenset[str]
    version_compatible: bool
    error_on_cache_miss: bool
    layer_info: bool


_V8 = TrtexecFlags(
    release="8.0",
    workspace_flag="--workspace",
    workspace_suffix="",
    skip_inference_flag="--buildOnly",
    precisions=frozenset({"fp16", "int8"}),
    strongly_typed=False,
    always_strongly_typed=False,
    scalar_shapes=False,
    builder_optimization_level=False,
    hardware_levels=frozenset(),
    version_compatible=False,
    error_on_cache_miss=False,
    layer_info=False,
)
# Each later row: what changed from the row before it.
_V84 = replace(_V8, release="8.4", workspace_flag="--memPoolSize", layer_info=True)
_V86 = replace(
    _V84,
    release="8.6",
    skip_inference_flag="--skipInference",
    builder_optimization_level=True,
    hardware_levels=HARDWARE_LEVELS_AMPERE,
    version_compatible=True,
)
_V10 = replace(
    _V86,
    release="10.0",
    precisions=frozenset({"fp16", "bf16", "int8", "fp8"}),
    strongly_typed=True,
    scalar_shapes=True,
    error_on_cache_miss=True,
)
_V109 = replace(_V10, release="10.9", hardware_levels=HARDWARE_LEVELS_ALL)
_V1014 = replace(_V109, release="10.14", workspace_suffix="M")
_V11 = replace(_V1014, release="11.0", precisions=frozenset(), always_strongly_typed=True)

# Newest first: the first row whose release is <= the target applies.
TRTEXEC_TABLE: tuple[TrtexecFlags, ...] = (_V11, _V1014, _V109, _V10, _V86, _V84, _V8)
OLDEST_MAJOR, NEWEST_MAJOR = 8, 11

# CUDA major -> minimum Linux driver (CUDA toolkit release notes, "minor version
# compatibility": 12.x needs >= 525.60.13, 13.x needs >= 580.65.06).
MIN_DRIVER_BY_CUDA_MAJOR = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
FP8_MIN_COMPUTE_CAPABILITY = (8, 9)
VERSION_TEXT = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?$")
# trtexec's first and last line: ``&&&& RUNNING TensorRT.trtexec [TensorRT v101401] [b48] #
# <command>``, then ``&&&& PASSED`` or ``&&&& FAILED`` with the same tags.
BANNER = re.compile(
    r"^&&&& (RUNNING|PASSED|FAILED) TensorRT\.trtexec \[TensorRT v(\d+)\]"
    r"(?: \[(b\d+)\])?(?: # (.*))?$"
)


def parse_version(text: str) -> tuple[int, ...]:
    """``"10.13"`` -> ``(10, 13)``, ``"10.14.1.48"`` -> ``(10, 14, 1, 48)``.

    Raises:
        UsageError: ``text`` is not dotted integers (``major.minor[.patch[.build]]``).
    """
    match = VERSION_TEXT.match(text.strip())
    if not match:
        raise UsageError(f"{text!r} is not a TensorRT version; write e.g. '10.13' or '10.13.2'")
    return tuple(int(part) for part in match.groups() if part is not None)


def trtexec_flags(version: str) -> TrtexecFlags:
    """The table row for TensorRT ``version`` (``"10.13"``, ``"8.6.1"``...).

    Raises:
        UsageError: the version is older than 8.0 or newer than the newest checked major.
    """
    wanted = parse_version(version)[:2]
    if not OLDEST_MAJOR <= wanted[0] <= NEWEST_MAJOR:
        raise UsageError(
            f"TensorRT {version} is not supported: trtexec flags were checked "
            f"for {OLDEST_MAJOR}.x to {NEWEST_MAJOR}.x",
            hint="set build.tensorrt.version to a checked release",
        )
    for row in TRTEXEC_TABLE:
        if parse_version(row.release)[:2] <= wanted:
            return row
    raise AssertionError("unreachable: the 8.0 row covers every 8.x")  # pragma: no cover


def version_from_image_tag(image: str) -> str | None:
    """The TensorRT release in an image tag that names it (``.../tensorrt:10.13.2-...``
    style tags); None for NGC's ``YY.MM-py3`` tags, whose release is set in the spec."""
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""
    match = re.match(r"^(\d+\.\d+(?:\.\d+)?)", tag)
    if not match or not OLDEST_MAJOR <= int(match.group(1).split(".")[0]) <= NEWEST_MAJOR:
        return None
    return match.group(1)


def tensorrt_version_from_tag(tag: str) -> str:
    """``"8203"`` -> ``"8.2.3"``; ``"101401"`` -> ``"10.14.1"`` (``vMmPP`` on 8.x,
    ``vMMmmPP`` from 9.x, as ``NV_TENSORRT_VERSION`` is printed)."""
    number = int(tag)
    if number < 10000:
        return f"{number // 1000}.{number // 100 % 10}.{number % 100}"
    return f"{number // 10000}.{number // 100 % 100}.{number % 100}"


def banner_version(text: str) -> str | None:
    """The TensorRT version in trtexec's output ``text`` (its last :data:`BANNER` line's
    tag, e.g. of ``trtexec --help``), or None when it printed no banner."""
    tags = [m.group(2) for line in text.splitlines() if (m := BANNER.match(line.rstrip()))]
    return tensorrt_version_from_tag(tags[-1]) if tags else None


def min_driver(cuda_version: str) -> str | None:
    """Minimum NVIDIA Linux driver for a CUDA runtime ``"12.9"`` (None when unknown)."""
    try:
        return MIN_DRIVER_BY_CUDA_MAJOR.get(parse_version(cuda_version)[0])
    except UsageError:
        return None
