"""Images made FROM the signed image, each changing one thing it runs or serves, on a real
Docker engine: `mmaas verify --key` refuses every one naming what changed, and the server
with MMAAS_TRUSTED_KEYS refuses to start each that changes what it can see (a changed
entrypoint is the deployer's own command at run time: verify catches it in the image).
The signature covers the image's files by the listing its manifest records, not by its
labels, which no derived image here touches."""

from __future__ import annotations

import secrets

import pytest
from deploy_e2e import MODEL_DIR, derived, mmaas

from docker_fixtures import run_to_exit

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SITE = "/opt/mmaas/venv/lib/python3.11/site-packages"
MARKER = "MMAAS-TAMPERED"

# name -> (Dockerfile lines, what verify and the start name, whether the start sees it)
CHANGES = {
    "sbom": (
        ['RUN echo \'{"bomFormat": "CycloneDX"}\' > /opt/mmaas/sbom.cdx.json'],
        "/opt/mmaas/sbom.cdx.json: a file of blake3:",
        True,
    ),
    "model-file": (
        [f"RUN echo extra > {MODEL_DIR}/notes.txt"],
        f"{MODEL_DIR}/notes.txt: added (not in the signed listing)",
        True,
    ),
    "server-code": (
        [f"RUN sed -i '1i print(\"{MARKER}\")' {SITE}/mmaas/server/app.py"],
        f"{SITE}/mmaas/server/app.py: a file of blake3:",
        True,
    ),
    "pth-file": (
        [f"RUN echo 'import sys' > {SITE}/zz-extra.pth"],
        f"{SITE}/zz-extra.pth: added",
        True,
    ),
    "sitecustomize": (
        [f"RUN echo 'print(\"{MARKER}\")' >> /etc/python3.11/sitecustomize.py"],
        "/etc/python3.11/sitecustomize.py: a file of blake3:",
        True,
    ),
    "path-entry": (
        ["RUN touch /usr/lib/python311.zip"],
        "/usr/lib/python311.zip: created on the interpreter's path (signed as absent)",
        True,
    ),
    "preload": (
        ["ENV LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libz.so.1"],
        "LD_PRELOAD='/usr/lib/x86_64-linux-gnu/libz.so.1' loads a library",
        True,
    ),
    "python-path": (
        [
            "RUN mkdir /srv/code",
            "ENV PYTHONPATH=/srv/code",
            'ENTRYPOINT ["python", "-m", "mmaas.server"]',
        ],
        "not the server as mmaas builds it",
        True,
    ),
    "entrypoint": (
        [
            f'ENTRYPOINT ["sh", "-c", "echo {MARKER}; exec python -I -B -u -m mmaas.server"]',
        ],
        "starts ['sh', '-c'",
        False,
    ),
}
START_REFUSALS = {
    "preload": "LD_PRELOAD='/usr/lib/x86_64-linux-gnu/libz.so.1' loads a library",
    "python-path": "which the signed listing does not cover",
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_derived_image_is_refused_by_verify_and_at_start(
    signed, keys, docker_cli, change: str
) -> None:
    _, image = signed
    lines, fragment, at_start = CHANGES[change]
    tag = f"{image.split(':')[0]}-{change}:{secrets.token_hex(3)}"
    with derived(docker_cli, image, tag, lines):
        verified = mmaas("verify", tag, "--key", str(keys["public"]))
        assert verified.returncode == 1, verified.stdout
        assert fragment in verified.stderr, verified.stderr
        assert "Traceback" not in verified.stderr
        if not at_start:
            return
        code, logs = run_to_exit(
            docker_cli, tag, env={"MMAAS_TRUSTED_KEYS": keys["public"].read_text()}
        )
        assert code == 1, logs
        assert START_REFUSALS.get(change, fragment) in logs, logs
        assert "SERVING" not in logs and "Traceback" not in logs
        if change == "server-code":
            assert MARKER not in logs  # refused before the patched module is imported
