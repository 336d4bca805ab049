"""Image decode and preprocessing equal transformers' Qwen2VLImageProcessorPil bit for bit
(pixel_values and grid) on real pictures, the C28 extreme sizes and the C29 image modes;
where transformers refuses an image the runtime refuses it too, with INVALID_ARGUMENT's
InputError naming the size and the rule."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

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


def cases(pictures: dict[str, bytes]) -> dict[str, bytes]:
    base = Image.open(io.BytesIO(pictures["grace_hopper.jpg"]))
    files = dict(pictures)
    for w, h in C28_SIZES:
        files[f"C28 {w}x{h}"] = encode(base.resize((w, h), Image.Resampling.BICUBIC))
    files.update({f"C29 {name}": data for name, data in c29_modes(base).items()})
    return files


def test_preprocessing_equals_transformers_bit_for_bit(generator, reference, pictures) -> None:
    preprocess = ImagePreprocessor(generator.config.image)
    for name, data in cases(pictures).items():
        out = reference.image_processor(images=[Image.open(io.BytesIO(data))], return_tensors="np")
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
    with pytest.raises(
        InputError, match=r"element 3: not an image Pillow can decode \(12 bytes\)"
    ) as caught:
        decode_image(b"not an image", 3, BUDGET)
    assert "object at 0x" not in str(caught.value)  # no Python repr reaches the client
    with pytest.raises(InputError, match="cannot decode this JPEG image of mode RGB"):
        decode_image(jpeg[: len(jpeg) // 2], 0, BUDGET)
    big = encode(Image.new("L", (9000, 8000)))
    with pytest.raises(InputError, match="9000x8000 = 72000000 pixels is over the pixel budget"):
        decode_image(big, 0, BUDGET)
