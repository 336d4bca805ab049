"""Build steps pyproject.toml cannot declare (everything else is in pyproject.toml):

* ``templates/`` (top level of the repository) ships inside the wheel as ``mmaas.templates``;
* the KServe v2 / Triton protocol stubs the server speaks (``grpc_service.proto``,
  ``model_config.proto``) are generated at build time with grpcio-tools' protoc into
  ``mmaas/server/protocol/stubs/`` (the protocol layer both front ends share), from the
  descriptors that tritonclient's generated modules carry (read as data, never imported),
  so the server needs neither the tritonclient package nor its heavy ``__init__`` at run
  time. They are written into the source tree (git-ignored), where every kind of build
  picks them up.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import tempfile
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent
PROTOCOL = Path("mmaas", "server", "protocol", "stubs")
PROTOS = {"model_config.proto": "model_config_pb2.py", "grpc_service.proto": "service_pb2.py"}


def _serialized(module_file: Path) -> bytes:
    """The FileDescriptorProto bytes a generated ``*_pb2.py`` hands to AddSerializedFile."""
    for node in ast.walk(ast.parse(module_file.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            return node.args[0].value
    raise RuntimeError(f"{module_file}: no serialized descriptor")


def generate_protocol(out: Path) -> None:
    """Write ``grpc_service_pb2.py``, ``grpc_service_pb2_grpc.py`` and
    ``model_config_pb2.py`` (package-relative imports) into ``out``."""
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    spec = importlib.util.find_spec("tritonclient")
    assert spec and spec.submodule_search_locations, "tritonclient is a build requirement"
    stubs = Path(next(iter(spec.submodule_search_locations))) / "grpc"
    files = descriptor_pb2.FileDescriptorSet()
    for name in PROTOS.values():
        files.file.add().ParseFromString(_serialized(stubs / name))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        descriptors = Path(scratch) / "protocol.pb"
        descriptors.write_bytes(files.SerializeToString())
        argv = ["protoc", f"--descriptor_set_in={descriptors}", f"--python_out={out}",
                f"--pyi_out={out}",
                f"--grpc_python_out={out}", *PROTOS]
        if protoc.main(argv) != 0:
            raise RuntimeError("protoc failed on the KServe v2 protocol descriptors")
    (out / "model_config_pb2_grpc.py").unlink()  # model_config.proto defines no service
    for generated in [*out.glob("*_pb2*.py"), *out.glob("*_pb2.pyi")]:
        text = re.sub(r"^import (\w+_pb2) as", r"from . import \1 as", generated.read_text(),
                      flags=re.M)
        generated.write_text(text)
    (out / "__init__.py").write_text(
        '"""KServe v2 / Triton gRPC protocol stubs, generated at build time (setup.py)."""\n'
    )


# Generated before setup() looks for packages, into the source tree (git-ignored): the
# wheel, the sdist's build and an editable install all pick it up as a package.
generate_protocol(ROOT / "toolkit" / PROTOCOL)
setup(
    packages=[*find_packages("toolkit"), "mmaas.templates"],
    package_dir={"": "toolkit", "mmaas.templates": "templates"},
    package_data={
        "mmaas": ["py.typed"],
        "mmaas.templates": ["*.j2", "*.txt"],
        "mmaas.server.protocol.stubs": ["*.pyi"],
    },
)
