"""Image decode and preprocessing equal transformers' ``load_image`` + Qwen2VLImageProcessorPil
bit for bit (pixel_values and grid) on real pictures, the C28 extreme sizes, the C29 image
modes and the C41 EXIF-rotated pictures (JPEG orientations 2, 3, 6, 8, PNG eXIf); where
transformers refuses an image the runtime refuses it too, with INVALID_ARGUMENT's
InputError naming the size and the rule; formats outside the allowlist are refused by
name before their decoder runs."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image
from transformers.image_utils import load_image

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.images import ImagePreprocessor, decode_image

from .conftest import encode

BUDGET = 64_000_000
C28_SIZES = [(1, 1), (27, 300), (300, 27), (26, 28), (28, 26), (690, 15420), (15420, 690)]
C28_REFUSED = [(20, 5000), (5000, 20)]  # aspect ratio 250 > 200


def c29_modes(base: Image.Image) -> dict[str, bytes]:
    """C29: one encoded file per mode, made from a real picture."""
    small = base.resize((160, 120))
    rgba = small.convert("RGBA")
    rgba.putalpha(0)  # fully transparent, colours kept underneath
    palette = small.convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
    la = small.convert("LA")
    la.putalpha(Image.linear_gradient("L").resize(small.size))
    gray16 = Image.fromarray(np.asarray(small.convert("L")).astype(np.uint16) * 257)
    frames = [small.rotate(90).convert("P")]
    return {
        "RGBA fully transparent PNG": encode(rgba),
        "P with a transparent index PNG": encode(palette, transparency=3),
        "I;16 PNG": encode(gray16),
        "CMYK JPEG": encode(small.convert("CMYK"), "JPEG", quality=90),
        "1-bit PNG": encode(small.convert("1")),
        "L PNG": encode(small.convert("L")),
        "LA PNG": encode(la),
        "F TIFF": encode(small.convert("F"), "TIFF"),
        "RGB WebP": encode(small, "WEBP", quality=90),
        "animated GIF": encode(small.convert("P"), "GIF", save_all=True, append_images=frames),
    }


def rotated(base: Image.Image) -> dict[str, bytes]:
    """C41: a non-square picture saved with EXIF orientation tags (2 mirror, 3 half turn,
    6 and 8 quarter turns: the stored pixels are a phone's sensor order)."""
    small = base.resize((96, 40))
    files = {}
    for tag in (2, 3, 6, 8):
        exif = Image.Exif()
        exif[0x0112] = tag
        files[f"C41 JPEG orientation {tag}"] = encode(small, "JPEG", quality=95, exif=exif)
    exif = Image.Exif()
    exif[0x0112] = 6
    files["C41 PNG eXIf orientation 6"] = encode(small, exif=exif)
    return files


def cases(pictures: dict[str, bytes]) -> dict[str, bytes]:
    base = Image.open(io.BytesIO(pictures["grace_hopper.jpg"]))
    files = dict(pictures)
    for w, h in C28_SIZES:
        files[f"C28 {w}x{h}"] = encode(base.resize((w, h), Image.Resampling.BICUBIC))
    files.update({f"C29 {name}": data for name, data in c29_modes(base).items()})
    files.update(rotated(base))
    return files


def test_preprocessing_equals_transformers_bit_for_bit(generator, reference, pictures) -> None:
    preprocess = ImagePreprocessor(generator.config.image)
    for name, data in cases(pictures).items():
        loaded = load_image(Image.open(io.BytesIO(data)))
        out = reference.image_processor(images=[loaded], return_tensors="np")
        pixels, grid = preprocess(decode_image(data, 0, BUDGET))
        assert [grid] == [tuple(int(v) for v in g) for g in out["image_grid_thw"]], name
        assert pixels.dtype == out["pixel_values"].dtype, name
        assert np.array_equal(pixels, out["pixel_values"]), name


@pytest.mark.parametrize("size", C28_REFUSED, ids=lambda s: f"{s[0]}x{s[1]}")
def test_an_aspect_ratio_over_200_is_refused_as_transformers_refuses_it(
    generator, reference, size
) -> None:
    data = encode(Image.new("RGB", size, (10, 200, 30)))
    with pytest.raises(ValueError):
        reference.image_processor(images=[Image.open(io.BytesIO(data))], return_tensors="np")
    preprocess = ImagePreprocessor(generator.config.image)
    with pytest.raises(InputError, match=rf"{size[0]}x{size[1]} .*aspect ratio of 250.0.*200"):
        preprocess(decode_image(data, 0, BUDGET))


def test_bad_encoded_images_are_refused_by_name(pictures) -> None:
    jpeg = pictures["rocket.jpg"]
    refused = r"element 3: not an image Pillow can decode \(12 bytes\)"
    with pytest.raises(InputError, match=refused) as caught:
        decode_image(b"not an image", 3, BUDGET)
    assert "object at 0x" not in str(caught.value)  # no Python repr reaches the client
    with pytest.raises(InputError, match="cannot decode this JPEG image of mode RGB"):
        decode_image(jpeg[: len(jpeg) // 2], 0, BUDGET)
    big = encode(Image.new("L", (9000, 8000)))
    with pytest.raises(InputError, match="9000x8000 = 72000000 pixels is over the pixel budget"):
        decode_image(big, 0, BUDGET)


def test_the_orientation_changes_the_grid(pictures) -> None:
    """A quarter turn swaps the sides, so the grid differs from the unrotated picture's
    (a server ignoring EXIF would answer with the unrotated grid)."""
    base = Image.open(io.BytesIO(pictures["grace_hopper.jpg"]))
    files = rotated(base)
    assert decode_image(files["C41 JPEG orientation 6"], 0, BUDGET).size == (40, 96)
    assert decode_image(files["C41 JPEG orientation 3"], 0, BUDGET).size == (96, 40)


@pytest.mark.parametrize("fmt", ["PCX", "TGA", "PPM", "ICO", "SGI", "QOI", "IM", "DDS"])
def test_formats_outside_the_allowlist_are_refused_by_name(fmt) -> None:
    data = encode(Image.new("RGB", (32, 32), (1, 2, 3)), fmt)
    with pytest.raises(InputError, match=rf"element 0: {fmt} pictures are not accepted; send JPEG"):
        decode_image(data, 0, BUDGET)


def test_eps_never_reaches_ghostscript() -> None:
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n"
    with pytest.raises(InputError, match="EPS pictures are not accepted"):
        decode_image(eps, 0, BUDGET)


def test_bytes_after_the_picture_are_ignored(pictures) -> None:
    """The documented rule: what follows the picture's end does not change it."""
    jpeg = pictures["rocket.jpg"]
    plain = np.asarray(decode_image(jpeg, 0, BUDGET))
    assert np.array_equal(np.asarray(decode_image(jpeg + b"\0junk" * 1000, 0, BUDGET)), plain)
