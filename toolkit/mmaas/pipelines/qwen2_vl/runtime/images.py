"""Image decode and Qwen2-VL's preprocessing, equal to transformers' ``Qwen2VLImageProcessorPil``
(checked bit for bit in tests/pipelines/qwen2_vl/runtime/test_images.py against transformers
5.24's ``load_image`` + the processor):

    encoded bytes -> :func:`decode_image` (load_image's rule: EXIF orientation, RGB)
    -> :class:`ImagePreprocessor` (smart_resize, bicubic resize, rescale, normalize,
    patchify) -> pixel_values + grid

Pillow only (no torch).
"""

from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.config import ImageSettings

MAX_ASPECT = 200  # transformers' smart_resize refuses a longer side over 200 x the shorter
# The formats a picture may be sent in (Pillow's names); others are refused by name.
FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")


def decode_image(data: bytes, index: int, max_input_pixels: int) -> Image.Image:
    """Encoded image bytes -> an RGB ``PIL.Image``, as transformers' ``load_image`` gives it
    to the processor: EXIF orientation applied (``ImageOps.exif_transpose``: JPEG, PNG
    ``eXIf``, WebP, TIFF tags 2-8), then ``convert("RGB")`` (an alpha band dropped, not
    composited; CMYK without ICC; I;16/I/F clipped to 0..255), then the processor's
    ``convert_to_rgb``: a transparent colour index (P, L) that survives as an RGB
    ``transparency`` becomes white. Only the first frame of an animation.

    Formats: :data:`FORMATS` only (``Image.open(..., formats=FORMATS)``); any other format
    Pillow knows (PCX, TGA, EPS, ICO, QOI...) is refused naming it, before its decoder
    runs. Bytes after the end of the picture are ignored (phones append data after a
    JPEG's end, e.g. motion photos), as ``load_image`` and browsers do; they count toward
    the request's size limit (``MMAAS_MAX_MESSAGE_SIZE``).

    Raises:
        InputError: ``image[index]`` is not an accepted format, not decodable, truncated,
            of an aspect ratio over 200 (:func:`smart_resize`'s rule, told before decoding),
            over ``max_input_pixels`` (read from the header, before decoding: a
            decompression bomb never decodes) or of a mode Pillow cannot convert to RGB.
    """
    name = f"input 'image' element {index}"
    try:
        image = Image.open(io.BytesIO(data), formats=FORMATS)
    except Image.DecompressionBombError as exc:  # over 2x Pillow's own limit (179 MP)
        raise InputError(
            f"{name}: over the pixel budget of {max_input_pixels} pixels per image ({exc})"
        ) from exc
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        # UnidentifiedImageError's own text names the in-memory file object (its repr)
        raise InputError(f"{name}: {_unreadable(data, exc)}") from exc
    width, height = image.size
    if width * height > max_input_pixels:
        raise InputError(
            f"{name}: {width}x{height} = {width * height} pixels is over the pixel budget "
            f"of {max_input_pixels} pixels per image; send a smaller picture"
        )
    if max(width, height) > MAX_ASPECT * min(width, height):  # smart_resize's rule, early
        raise InputError(
            f"{name}: {width}x{height} has an aspect ratio of "
            f"{max(width, height) / min(width, height):.1f}, over Qwen2-VL's limit of "
            f"{MAX_ASPECT}; crop or pad the picture"
        )
    try:
        image.load()
        rgb = ImageOps.exif_transpose(image).convert("RGB")
        if rgb.info.get("transparency") is None:
            return rgb
        # a palette or grey picture's transparent colour survives convert("RGB") as an
        # RGB ``transparency``: the processor's convert_to_rgb makes those pixels white
        white = Image.new("RGBA", rgb.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgb.convert("RGBA")).convert("RGB")
    except (OSError, ValueError, SyntaxError) as exc:  # truncated data, unconvertible mode
        raise InputError(
            f"{name}: cannot decode this {image.format} image of mode {image.mode} to RGB: {exc}"
        ) from exc


def _unreadable(data: bytes, exc: Exception) -> str:
    """Why bytes no accepted format opens were refused: the format Pillow would take them
    for (its header parser only: no decoder runs), or that none does."""
    accepted = ", ".join(FORMATS)
    if not isinstance(exc, UnidentifiedImageError):
        return f"not an image Pillow can decode ({len(data)} bytes): {exc}"
    try:
        with Image.open(io.BytesIO(data)) as other:
            found = other.format
    except Exception:  # any header parser's failure: the bytes are no known format
        found = None
    if found:
        return f"{found} pictures are not accepted; send {accepted}"
    return (
        f"not an image Pillow can decode ({len(data)} bytes): no format Pillow reads starts "
        f"so; send the encoded file's bytes ({accepted})"
    )


def smart_resize(
    height: int, width: int, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """Qwen2-VL's resize target, transformers' ``smart_resize`` arithmetic (Python ``round``
    is round-half-even there too): both sides multiples of ``factor`` (28), the area within
    [min_pixels, max_pixels], the aspect ratio kept. A side under 28 is scaled up (1x1 ->
    56x56), as transformers 5.24 does.

    Raises:
        InputError: aspect ratio over 200 (transformers' ValueError for the same rule).
    """
    aspect = max(height, width) / min(height, width)
    if aspect > MAX_ASPECT:
        raise InputError(
            f"input 'image': {width}x{height} has an aspect ratio of {aspect:.1f}, over "
            f"Qwen2-VL's limit of {MAX_ASPECT}; crop or pad the picture"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


class ImagePreprocessor:
    """RGB image -> ``pixel_values`` FP32 [h*w, 1176] and its grid (1, h, w) in patches, what
    Qwen2VLImageProcessorPil gives bit for bit: Pillow resize (bicubic) to the smart_resize
    size, rescale (uint8 -> float64 x rescale_factor -> float32), normalize ((x - mean) / std
    in float32), patchify (merge blocks row-major, the 2x2 patches of a block, channels, the
    frame repeated temporal_patch_size times, 14x14 pixels).

    Rescale + normalize of a byte depends only on (channel, byte value): computed once into
    a [3, 256] table with the same numpy float operations, then gathered per pixel."""

    def __init__(self, settings: ImageSettings) -> None:
        self.settings = settings
        self.resample = Image.Resampling(settings.resample)
        byte = np.arange(256, dtype=np.uint8)[None, :].repeat(3, axis=0)  # [3, 256]
        rescaled = (byte.astype(np.float64) * settings.rescale_factor).astype(np.float32)
        mean = np.array(settings.image_mean, dtype=np.float32)
        std = np.array(settings.image_std, dtype=np.float32)
        self.table = ((rescaled.T - mean) / std).T  # [3, 256] float32

    def grid(self, width: int, height: int) -> tuple[int, int, int]:
        """(t, h, w) in patches of an image of ``width`` x ``height`` pixels (InputError
        for an aspect ratio over 200)."""
        s = self.settings
        h, w = smart_resize(height, width, s.patch_size * s.merge_size, s.min_pixels, s.max_pixels)
        return 1, h // s.patch_size, w // s.patch_size

    def __call__(self, image: Image.Image) -> tuple[np.ndarray, tuple[int, int, int]]:
        """-> (pixel_values FP32 [h*w, patch_features], (1, h, w))."""
        s = self.settings
        p, m = s.patch_size, s.merge_size
        _, gh, gw = grid = self.grid(*image.size)
        resized = image.resize((gw * p, gh * p), resample=self.resample)
        pixels = np.asarray(resized)  # [H, W, 3] uint8
        chw = self.table[np.arange(3)[:, None, None], pixels.transpose(2, 0, 1)]  # [3, H, W]
        patches = chw.reshape(3, gh // m, m, p, gw // m, m, p).transpose(1, 4, 2, 5, 0, 3, 6)
        patches = np.broadcast_to(
            patches[:, :, :, :, :, None], (*patches.shape[:5], s.temporal_patch_size, p, p)
        )
        return patches.reshape(gh * gw, s.patch_features), grid
