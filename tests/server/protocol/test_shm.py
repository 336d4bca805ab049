"""System shared memory core (:mod:`mmaas.server.protocol.shm`), every check of CASES.md
C27, on real POSIX shared memory objects made by tritonclient's own utility (``shm_open`` +
``ftruncate`` in its C library): register, read and write exactly [offset, offset + size),
refusals naming region, offset and sizes, unmapping on unregister and at close."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.utils.shared_memory as triton_shm

from mmaas.server.protocol.shm import SystemSharedMemory, TensorRef, tensor_ref
from mmaas.server.status import AlreadyExists, InvalidArgument, NotFound

SIZE = 3 * 4096


@pytest.fixture
def shm_object() -> Iterator[tuple[str, object]]:
    """A 12 KiB shared memory object filled with bytes 0, 1, 2, ... (mod 251)."""
    key = f"/mmaas-test-{uuid.uuid4().hex[:12]}"
    handle = triton_shm.create_shared_memory_region("t", key, SIZE)
    pattern = (np.arange(SIZE) % 251).astype(np.uint8)
    triton_shm.set_shared_memory_region(handle, [pattern])
    yield key, handle
    triton_shm.destroy_shared_memory_region(handle)


def maps(key: str) -> int:
    """How many mappings of the object ``key`` this process holds (``/proc/self/maps``;
    tritonclient's own handle is one)."""
    with open("/proc/self/maps") as lines:
        return sum(line.rstrip().endswith(f"/dev/shm{key}") for line in lines)


def test_reads_and_writes_exactly_the_range_offsets_applied_once(shm_object) -> None:
    key, handle = shm_object
    registry = SystemSharedMemory()
    registry.register("r", key, 4096 + 10, 100)  # not page aligned: mmap needs the page below
    lease = registry.lease()
    data = lease.read(TensorRef("r", 6, 8), "input 'x'")
    assert bytes(data) == bytes((np.arange(4096 + 16, 4096 + 24) % 251).astype(np.uint8))
    lease.write(TensorRef("r", 20, 4), b"\xff\xfe\xfd\xfc", "output 'y'")
    after = triton_shm.get_contents_as_numpy(handle, np.uint8, [SIZE])
    assert after[4096 + 30 : 4096 + 34].tolist() == [255, 254, 253, 252]
    want = (np.arange(SIZE) % 251).astype(np.uint8)
    changed = np.flatnonzero(after != want)
    assert changed.tolist() == [4126, 4127, 4128, 4129]  # nothing else touched
    assert [s.__dict__ for s in registry.status()] == [
        {"name": "r", "key": key, "offset": 4106, "byte_size": 100, "pending": False}
    ]
    data.release()
    lease.release()
    registry.close()


def test_a_region_larger_than_its_object_is_refused_with_both_sizes(shm_object) -> None:
    key, _ = shm_object
    registry = SystemSharedMemory()
    with pytest.raises(InvalidArgument) as error:
        registry.register("big", key, 8192, 8192)
    assert error.value.message == (
        "failed to register shared memory region 'big': offset 8192 + byte_size 8192 = "
        f"16384 bytes, but the shared memory object '{key}' holds {SIZE} bytes"
    )
    assert registry.status() == [] and maps(key) == 1


@pytest.mark.parametrize(
    ("ref", "fragment"),
    [
        (
            TensorRef("r", 60, 50),
            "holds 100 bytes, but shared_memory_offset 60 + "
            "shared_memory_byte_size 50 = 110 bytes passes its end",
        ),
        (TensorRef("r", 100, 1), "shared_memory_offset 100 + shared_memory_byte_size 1"),
        (TensorRef("nope", 0, 1), "Unable to find shared memory region: 'nope'"),
    ],
)
def test_a_tensor_range_past_its_region_is_refused(shm_object, ref, fragment) -> None:
    key, _ = shm_object
    registry = SystemSharedMemory()
    registry.register("r", key, 0, 100)
    lease = registry.lease()
    for call in (
        lambda: lease.read(ref, "input 'x'"),
        lambda: lease.write(ref, b"\0", "output 'y'"),
    ):
        with pytest.raises((InvalidArgument, NotFound)) as error:
            call()
        assert fragment in error.value.message and error.value.message.startswith(
            ("input 'x'", "output 'y'")
        )
    registry.close()


def test_an_output_larger_than_its_place_is_refused_and_nothing_written(shm_object) -> None:
    key, handle = shm_object
    registry = SystemSharedMemory()
    registry.register("out", key, 0, 64)
    before = triton_shm.get_contents_as_numpy(handle, np.uint8, [SIZE]).copy()
    with pytest.raises(InvalidArgument) as error, registry.lease() as lease:
        lease.write(TensorRef("out", 0, 8), b"\1" * 16, "output 'y'")
    assert error.value.message == (
        "output 'y': shared memory region 'out' at offset 0 has shared_memory_byte_size 8 "
        "bytes, but the output needs 16 bytes to hold the results; give it at least 16 bytes"
    )
    np.testing.assert_array_equal(
        triton_shm.get_contents_as_numpy(handle, np.uint8, [SIZE]), before
    )
    registry.close()


@pytest.mark.parametrize(
    ("name", "key", "offset", "size", "fragment"),
    [
        (
            "m",
            "/mmaas-no-such-object",
            0,
            8,
            "Unable to open shared memory region: '/mmaas-no-such-object' for region 'm': "
            "no such object in this server's /dev/shm; the client creates it (shm_open), and "
            "the server must share the client's IPC namespace to see it: run the image with "
            "`docker run --ipc=host`",
        ),
        ("m", "/../../etc/passwd", 0, 8, "invalid shm key '/../../etc/passwd'"),
        ("m", "///", 0, 8, "invalid shm key '///'"),
        ("m", "", 0, 8, "invalid shm key ''"),
        ("", "/k", 0, 8, "needs a name"),
        ("m", "/k", -1, 8, "offset -1 and byte_size 8 must be"),
        ("m", "/k", 0, 0, "offset 0 and byte_size 0 must be"),
    ],
)
def test_bad_keys_names_and_sizes_are_refused(name, key, offset, size, fragment) -> None:
    with pytest.raises(InvalidArgument) as error:
        SystemSharedMemory().register(name, key, offset, size)
    assert fragment in error.value.message


def test_a_symlink_in_dev_shm_is_not_followed(tmp_path) -> None:
    link = f"mmaas-test-link-{uuid.uuid4().hex[:8]}"
    target = tmp_path / "secret"
    target.write_bytes(b"x" * 64)
    os.symlink(target, f"/dev/shm/{link}")
    try:
        with pytest.raises(InvalidArgument, match="Unable to open shared memory region"):
            SystemSharedMemory().register("m", f"/{link}", 0, 8)
    finally:
        os.unlink(f"/dev/shm/{link}")


def test_a_name_registered_twice_is_refused_until_unregistered(shm_object) -> None:
    key, _ = shm_object
    registry = SystemSharedMemory()
    registry.register("r", key, 0, 16)
    with pytest.raises(AlreadyExists, match="shared memory region 'r' already in manager"):
        registry.register("r", key, 16, 16)
    registry.unregister("r")
    registry.register("r", key, 16, 16)
    registry.close()


def test_unregister_and_close_unmap_the_regions(shm_object) -> None:
    key, _ = shm_object
    registry = SystemSharedMemory()
    registry.register("a", key, 0, 16)
    registry.register("b", key, 4096, 16)
    assert maps(key) == 3
    registry.unregister("a")
    assert [s.name for s in registry.status()] == ["b"] and maps(key) == 2
    registry.unregister("never-registered")  # fine, as Triton
    with pytest.raises(NotFound, match="Unable to find system shared memory region: 'a'"):
        registry.status("a")
    registry.close()
    assert registry.status() == [] and maps(key) == 1
    registry.unregister()  # nothing registered: still fine


def test_a_region_in_use_is_unmapped_once_its_last_array_goes(shm_object) -> None:
    key, _ = shm_object
    registry = SystemSharedMemory()
    registry.register("a", key, 0, 16)
    with registry.lease() as lease:
        array = np.frombuffer(lease.read(TensorRef("a", 0, 16), "input 'x'"), np.uint8)
    registry.unregister("a")  # the request ended, but its array is still referenced
    assert registry.status() == [] and maps(key) == 2 and array.sum() == sum(range(16))
    del array
    assert maps(key) == 1


def test_unregister_keeps_a_region_in_flight_until_its_requests_end(shm_object) -> None:
    key, _ = shm_object
    registry = SystemSharedMemory()
    registry.register("a", key, 0, 16)
    registry.register("b", key, 16, 16)
    first, second = registry.lease(), registry.lease()
    first.read(TensorRef("a", 0, 4), "input 'x'").release()
    second.read(TensorRef("a", 4, 4), "input 'x'").release()
    second.check(TensorRef("b", 0, 8), "output 'y'", 8)
    registry.unregister()  # both, while two requests use 'a' and one 'b'
    assert [(s.name, s.pending) for s in registry.status()] == [("a", True), ("b", True)]
    with pytest.raises(NotFound, match="Unable to find shared memory region: 'a'"):
        registry.lease().read(TensorRef("a", 0, 4), "input 'z'")  # a new request
    second.write(TensorRef("b", 0, 4), b"done", "output 'y'")  # the ones in flight go on
    registry.register("a", key, 8, 8)  # the name is free again
    assert [(s.name, s.offset, s.pending) for s in registry.status("a")] == [
        ("a", 8, False),
        ("a", 0, True),
    ]
    assert maps(key) == 4
    second.release()
    assert [(s.name, s.pending) for s in registry.status()] == [("a", False), ("a", True)]
    assert maps(key) == 3  # 'b' is gone with its last request
    first.release()
    assert [(s.name, s.pending) for s in registry.status()] == [("a", False)] and maps(key) == 2
    registry.close()
    assert maps(key) == 1


def test_close_unmaps_regions_in_use_too(shm_object) -> None:
    key, _ = shm_object
    registry = SystemSharedMemory()
    registry.register("a", key, 0, 16)
    lease = registry.lease()
    lease.read(TensorRef("a", 0, 4), "input 'x'").release()
    registry.unregister("a")
    assert registry.close() == 0 and registry.status() == [] and maps(key) == 1
    lease.release()  # the request ends after shutdown: nothing left to unmap
    assert maps(key) == 1


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        ({}, None),
        ({"binary_data_size": 8}, None),
        ({"shared_memory_region": "r", "shared_memory_byte_size": 8}, TensorRef("r", 0, 8)),
        (
            {"shared_memory_region": "r", "shared_memory_offset": 4, "shared_memory_byte_size": 8},
            TensorRef("r", 4, 8),
        ),
    ],
)
def test_tensor_parameters_name_a_place(parameters, expected) -> None:
    assert tensor_ref(parameters, "input 'x'") == expected


@pytest.mark.parametrize(
    ("parameters", "fragment"),
    [
        ({"shared_memory_byte_size": 8}, "'shared_memory_byte_size' is set without"),
        ({"shared_memory_region": "r"}, "needs 'shared_memory_byte_size'"),
        ({"shared_memory_region": 3, "shared_memory_byte_size": 8}, "must be a region name"),
        ({"shared_memory_region": "r", "shared_memory_byte_size": -8}, "got -8"),
        ({"shared_memory_region": "r", "shared_memory_byte_size": True}, "got True"),
        (
            {
                "shared_memory_region": "r",
                "shared_memory_byte_size": 8,
                "shared_memory_offset": "4",
            },
            "'shared_memory_offset' must be a number of bytes >= 0, got '4'",
        ),
    ],
)
def test_bad_tensor_parameters_are_refused(parameters, fragment) -> None:
    with pytest.raises(InvalidArgument) as error:
        tensor_ref(parameters, "input 'x'")
    assert error.value.message.startswith("input 'x': ") and fragment in error.value.message
